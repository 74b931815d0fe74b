//! Golden plans: `weir validate`'s text and DOT for every graph in `graphs/`, kept in
//! `tests/golden/`. A change to planning shows up as a diff here; regenerate with `WEIR_BLESS=1`.

use weir::load_graph;

use crate::common::{repo, weir_home};

#[test]
fn plans_match_golden_files() {
    weir_home();
    let bless = std::env::var_os("WEIR_BLESS").is_some();
    let mut mismatches = Vec::new();
    for name in [
        "quickstart",
        "ensemble",
        "digits",
        "digits_parity",
        "seq_pool",
        "unbatched",
        "sequence",
        "magika",
        "digits_named",
        "topics",
        "ocr",
    ] {
        let plan = load_graph(&repo().join(format!("graphs/{name}.yaml")))
            .expect("valid")
            .plan;
        for (ext, text) in [("plan.txt", plan.describe()), ("dot", plan.dot())] {
            let path = repo().join(format!("tests/golden/{name}.{ext}"));
            if bless {
                std::fs::write(&path, &text).expect("writes golden file");
                continue;
            }
            let want = std::fs::read_to_string(&path).unwrap_or_default();
            if want != text {
                mismatches.push(format!(
                    "{}:\n--- want\n{want}\n--- got\n{text}",
                    path.display()
                ));
            }
        }
    }
    assert!(
        mismatches.is_empty(),
        "plans changed (WEIR_BLESS=1 to accept):\n{}",
        mismatches.join("\n")
    );
}
