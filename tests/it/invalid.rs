//! Every invalid graph in `tests/invalid/` is rejected with the error its first line names
//! (`# error: <expected substring>`), located in the file.

use weir::{load_graph, LoadError};

use crate::common::{repo, weir_home};

#[test]
fn every_invalid_graph_fails_with_its_message_and_location() {
    weir_home();
    let dir = repo().join("tests/invalid");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/invalid exists")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    files.sort();
    assert!(files.len() >= 10, "expected one file per validation rule");
    for path in files {
        let text = std::fs::read_to_string(&path).expect("readable");
        let expected = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# error: "))
            .unwrap_or_else(|| panic!("{} must start with `# error: <substring>`", path.display()));
        match load_graph(&path) {
            Ok(_) => panic!("{} validated, expected `{expected}`", path.display()),
            Err(LoadError::Invalid(d)) => {
                let rendered = d.to_string();
                assert!(
                    rendered.contains(expected),
                    "{}: expected `{expected}` in:\n{rendered}",
                    path.display()
                );
                let located = format!("{}:", path.display());
                assert!(
                    rendered.contains(&located),
                    "{}: no location in:\n{rendered}",
                    path.display()
                );
            }
            Err(e) => panic!("{}: {e}", path.display()),
        }
    }
}
