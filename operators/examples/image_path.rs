//! The OCR graph's image path alone, for profiling (`valgrind --tool=callgrind`): every inline op
//! node of `graphs/ocr.yaml` as planned (fused or not), run on the rendered pages without the
//! models, the HTTP server or the dataflow.
//!
//! The ops run in plan order on a table of columns, each when its inputs are there: decode,
//! resize and the detector's pre-processing from the page, then `crop_boxes` on three fixed line
//! boxes per page (the detector's regions need the detector) and each line's two pre-processing
//! branches; what only follows a model is never reached. Each op runs inside a wrapper function
//! of its own, never inlined, so a profile's inclusive cost per wrapper is the cost per op.
//!
//! Run natively it prints each kind of op's wall time and output bytes per page, and the rate at
//! which it writes them: what says whether an op runs at memory speed, which instruction counts
//! alone do not (a table lookup per element costs more instructions than arithmetic that
//! vectorises, and still writes faster).
//!
//! `cargo run --release -p weir-operators --example image_path -- [GRAPH] [PAGES_DIR] [ROUNDS]`

use std::collections::HashMap;
use std::error::Error;
use std::path::Path;
use std::time::{Duration, Instant};

use weir_engine::batch::TensorColumn;
use weir_engine::plan::{plan, Plan};
use weir_engine::spec::GraphSpec;
use weir_engine::tensor::TensorData;
use weir_engine::validate::validate;
use weir_operators::tensor::TensorOp;

type Columns = Vec<TensorColumn>;
type Wrapper = fn(&TensorOp, &[&TensorColumn]) -> Result<Columns, String>;

/// Per kind of op: wall time and bytes of output, over every page and round.
type Totals = HashMap<&'static str, (Duration, usize)>;

macro_rules! wrappers {
    ($($name:ident),*) => {
        $(
            #[inline(never)]
            fn $name(op: &TensorOp, inputs: &[&TensorColumn]) -> Result<Columns, String> {
                // Each wrapper's body differs, so the optimiser cannot fold them into one symbol.
                std::hint::black_box(stringify!($name));
                op.apply(inputs)
            }
        )*
    };
}
wrappers!(
    op_decode_image,
    op_resize,
    op_cast,
    op_transpose,
    op_normalize,
    op_fused_preprocess,
    op_crop_boxes,
    op_other
);

/// The wrapper an op runs in and its name, by the start of its label (`weir validate`'s text).
fn wrapper(label: &str) -> (&'static str, Wrapper) {
    if label.contains("(fused:") {
        return ("fused pre-processing", op_fused_preprocess);
    }
    match label.split_whitespace().next() {
        Some("decode_image") => ("decode_image", op_decode_image),
        Some("resize") => ("resize", op_resize),
        Some("cast") => ("cast", op_cast),
        Some("transpose") => ("transpose", op_transpose),
        Some("normalize") => ("normalize", op_normalize),
        Some("crop_boxes") => ("crop_boxes", op_crop_boxes),
        _ => ("other", op_other),
    }
}

/// One page through every op that its inputs reach.
fn run_page(plan: &Plan, page: &[u8], totals: &mut Totals) -> Result<usize, Box<dyn Error>> {
    let mut table: HashMap<String, TensorColumn> = HashMap::new();
    let image =
        TensorColumn::from_data("image", vec![1], 1, TensorData::Bytes(vec![page.to_vec()]))?;
    table.insert("image".into(), image);
    let boxes = [
        0.05f32, 0.1, 0.9, 0.3, 0.05, 0.4, 0.7, 0.6, 0.1, 0.7, 0.95, 0.9,
    ];
    table.insert(
        "lines.boxes".into(),
        TensorColumn::from_data("b", vec![3, 4], 1, TensorData::F32(boxes.to_vec()))?,
    );
    table.insert(
        "lines.scores".into(),
        TensorColumn::from_data("s", vec![3], 1, TensorData::F32(vec![0.9, 0.8, 0.7]))?,
    );
    let mut ran = 0;
    for n in &plan.nodes {
        let Some(op) = TensorOp::from_kind(&n.node.kind) else {
            continue;
        };
        let inputs: Option<Vec<&TensorColumn>> =
            n.node.inputs.iter().map(|p| table.get(&p.column)).collect();
        let Some(inputs) = inputs else {
            continue;
        };
        let (kind, run) = wrapper(&plan.node_label(n));
        let start = Instant::now();
        let outputs = run(&op, &inputs)?;
        let took = start.elapsed();
        let total = totals.entry(kind).or_default();
        total.0 += took;
        total.1 += outputs.iter().map(TensorColumn::memory_size).sum::<usize>();
        ran += 1;
        for ((name, _), column) in n.node.outputs.iter().zip(outputs) {
            // A fan-out's parts become rows of their own, as the dataflow's split makes them.
            let column = match (n.fans_out(), column.uniform_shape()) {
                (true, Some(shape)) if !shape.is_empty() => {
                    TensorColumn::from_data("part", shape[1..].to_vec(), shape[0], column.data())?
                }
                _ => column,
            };
            table.insert(n.node.column(name), column);
        }
    }
    Ok(ran)
}

/// GB/s of the memory-speed reference: a 6 MB buffer (the detector input's size) copied into a
/// fresh allocation, as an op writes its output, best of a few rounds.
fn copy_rate() -> f64 {
    const BYTES: usize = 6 << 20;
    let source = vec![1u8; BYTES];
    let mut best = Duration::MAX;
    for _ in 0..50 {
        let start = Instant::now();
        std::hint::black_box(std::hint::black_box(&source).clone());
        best = best.min(start.elapsed());
    }
    BYTES as f64 / best.as_secs_f64().max(1e-9) / 1e9
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let graph = Path::new(args.first().map_or("graphs/ocr.yaml", String::as_str));
    let pages_dir = Path::new(args.get(1).map_or(".weir/data/text_images", String::as_str));
    let rounds: usize = args.get(2).map_or(Ok(1), |r| r.parse())?;
    let text = std::fs::read_to_string(graph)?;
    let spec =
        GraphSpec::from_yaml(&text, &graph.display().to_string()).map_err(|e| format!("{e:?}"))?;
    let base = graph.parent().ok_or("graph without a folder")?;
    let plan = plan(&validate(&spec, base).map_err(|e| format!("{e:?}"))?);
    let mut names: Vec<_> = std::fs::read_dir(pages_dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "png"))
        .collect();
    names.sort();
    let pages: Vec<Vec<u8>> = names.iter().map(std::fs::read).collect::<Result<_, _>>()?;
    let mut ran = 0;
    let mut totals = Totals::new();
    for _ in 0..rounds {
        for page in &pages {
            ran += run_page(&plan, page, &mut totals)?;
        }
    }
    println!("{} pages × {rounds} rounds, {ran} op runs", pages.len());
    let runs = (pages.len() * rounds).max(1) as f64;
    let copy = copy_rate();
    let mut kinds: Vec<_> = totals.into_iter().collect();
    kinds.sort_by_key(|(_, (took, _))| std::cmp::Reverse(*took));
    println!("| op | ms per page | MB written per page | GB/s written | × a plain copy's rate |");
    println!("|---|---|---|---|---|");
    for (kind, (took, bytes)) in kinds {
        let secs = took.as_secs_f64();
        let rate = if secs > 0.0 {
            bytes as f64 / secs / 1e9
        } else {
            0.0
        };
        println!(
            "| {kind} | {:.3} | {:.2} | {rate:.1} | {:.2} |",
            secs * 1e3 / runs,
            bytes as f64 / runs / 1e6,
            rate / copy
        );
    }
    println!("| reference: a plain copy into a fresh 6 MB buffer | | | {copy:.1} | 1.00 |");
    Ok(())
}
