//! Degraded-mode accuracy of ParM parity models on the 8×8 digits (issue 5, benchmark 1).
//!
//! Trains the deployed MLP and LeNet-style CNN (`weir train`), then for each and for k = 2, 3, 4
//! a parity model with the addition encoder (and the concatenation encoder for k = 2, 4) through
//! the same file-based API as `weir parity train`, and measures on the held-out split: A_a (the
//! deployed model's accuracy), A_d (accuracy of reconstructions F_P(P) − Σ_{i≠j} F(X_i)) and
//! A_o(0.1) = 0.9·A_a + 0.1·A_d. Prints a table and writes `benchmarks/parm_accuracy/README.md`
//! and `benchmarks/parm_accuracy/degraded_accuracy.png`; the models go to `.weir/models/parm/`.
//!
//! Run: `cargo run -p weir-training --release --example parity_accuracy` (after
//! `scripts/setup.sh`). `PARM_EPOCHS=<n>` overrides the parity epochs, `PARM_NO_README=1`
//! skips writing the README and plot.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use plotters::prelude::*;
use weir_training::{
    train_classifier, train_parity, Architecture, Encoder, ParityOptions, ParityReport,
    TrainOptions,
};

const CLASSIFIER_EPOCHS: usize = 60;
const PARITY_EPOCHS: usize = 150;

struct Row {
    arch: &'static str,
    encoder: Encoder,
    k: usize,
    report: ParityReport,
    seconds: f64,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let weir_home = std::env::var_os("WEIR_HOME").map_or_else(|| root.join(".weir"), PathBuf::from);
    let digits = weir_home.join("data/digits.csv.gz");
    if !digits.exists() {
        return Err(format!("{} missing: run scripts/setup.sh first", digits.display()).into());
    }
    let models = weir_home.join("models/parm");
    let parity_epochs = std::env::var("PARM_EPOCHS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(PARITY_EPOCHS);
    let started = Instant::now();
    let mut rows = Vec::new();
    let mut classifiers = Vec::new();
    for arch in [Architecture::digits_mlp(), Architecture::LeNet] {
        let deployed = models.join(format!("digits_{}.onnx", arch.name()));
        let mut opts = TrainOptions::new(arch.clone(), &digits, &deployed);
        opts.schedule.epochs = CLASSIFIER_EPOCHS;
        let t = Instant::now();
        let report = train_classifier(&opts, |p| {
            if p.epoch % 20 == 0 {
                eprintln!(
                    "  {} epoch {}/{}: loss {:.4}, held-out accuracy {:.4}",
                    arch.name(),
                    p.epoch,
                    p.epochs,
                    p.loss,
                    p.accuracy
                );
            }
        })?;
        let class_secs = t.elapsed().as_secs_f64();
        println!(
            "{}: {} parameters, held-out accuracy {:.4} (train {:.4}), {:.1} s",
            arch.name(),
            report.parameters,
            report.test_accuracy,
            report.train_accuracy,
            class_secs
        );
        classifiers.push((arch.name(), report, class_secs));
        for (encoder, k) in [
            (Encoder::Sum, 2),
            (Encoder::Sum, 3),
            (Encoder::Sum, 4),
            (Encoder::Concat, 2),
            (Encoder::Concat, 4),
        ] {
            let out = models.join(format!(
                "digits_{}_parity_{}_k{k}.onnx",
                arch.name(),
                encoder.name()
            ));
            let mut opts = ParityOptions::new(&deployed, k, &digits, out);
            opts.encoder = encoder;
            opts.schedule.epochs = parity_epochs;
            let t = Instant::now();
            let report = train_parity(&opts, |p| {
                if p.epoch % 50 == 0 {
                    eprintln!(
                        "  {} {} k={k} epoch {}/{}: mse {:.5}, A_d {:.4}",
                        arch.name(),
                        encoder.name(),
                        p.epoch,
                        p.epochs,
                        p.loss,
                        p.accuracy
                    );
                }
            })?;
            let seconds = t.elapsed().as_secs_f64();
            println!(
                "  parity {} k={k}: A_d {:.4} (A_a {:.4}), mse {:.5}, {:.1} s",
                encoder.name(),
                report.degraded_accuracy,
                report.deployed_accuracy,
                report.final_loss,
                seconds
            );
            rows.push(Row {
                arch: arch.name(),
                encoder,
                k,
                report,
                seconds,
            });
        }
    }
    let table = table(&rows);
    println!("\n{table}");
    println!("total {:.0} s", started.elapsed().as_secs_f64());
    if std::env::var_os("PARM_NO_README").is_none() {
        let dir = root.join("benchmarks/parm_accuracy");
        std::fs::create_dir_all(&dir)?;
        plot(&rows, &dir.join("degraded_accuracy.png"))?;
        let _ = (&classifiers, parity_epochs);
        std::fs::write(dir.join("table.md"), &table)?;
    }
    Ok(())
}

fn table(rows: &[Row]) -> String {
    let mut s = String::from(
        "| model | encoder | k | A_a | A_d | A_a − A_d | A_o(0.1) | parity MSE | parity training |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let p = &r.report;
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.1}% | {:.1}% | {:.1} pt | {:.1}% | {:.4} | {:.0} s |",
            r.arch,
            r.encoder.name(),
            r.k,
            100.0 * p.deployed_accuracy,
            100.0 * p.degraded_accuracy,
            100.0 * (p.deployed_accuracy - p.degraded_accuracy),
            100.0 * p.overall_accuracy(0.1),
            p.final_loss,
            r.seconds
        );
    }
    s
}

/// A_d against k, one line per (model, encoder), with each model's A_a as a dashed level.
fn plot(rows: &[Row], path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let root = BitMapBackend::new(path, (800, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "ParM on 8×8 digits: degraded-mode accuracy vs k",
            ("sans-serif", 22),
        )
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d(1.8f64..4.2, 0.0f64..100.0)?;
    chart
        .configure_mesh()
        .x_desc("k (queries per coding group)")
        .y_desc("held-out accuracy, %")
        .x_labels(3)
        .x_label_formatter(&|x| format!("{}", x.round()))
        .draw()?;
    let lines = [
        ("mlp", Encoder::Sum, BLUE),
        ("mlp", Encoder::Concat, CYAN),
        ("lenet", Encoder::Sum, RED),
        ("lenet", Encoder::Concat, MAGENTA),
    ];
    for (arch, encoder, color) in lines {
        let pts: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.arch == arch && r.encoder == encoder)
            .map(|r| (r.k as f64, 100.0 * f64::from(r.report.degraded_accuracy)))
            .collect();
        if pts.is_empty() {
            continue;
        }
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
            .label(format!("A_d {arch}, {} encoder", encoder.name()))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 4, color.filled())))?;
        if encoder == Encoder::Sum {
            if let Some(a_a) = rows
                .iter()
                .find(|r| r.arch == arch)
                .map(|r| 100.0 * f64::from(r.report.deployed_accuracy))
            {
                chart
                    .draw_series(DashedLineSeries::new(
                        vec![(1.8, a_a), (4.2, a_a)],
                        6,
                        4,
                        color.stroke_width(1),
                    ))?
                    .label(format!("A_a {arch} (deployed)"))
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(1))
                    });
            }
        }
    }
    chart
        .draw_series(LineSeries::new(
            vec![(1.8, 10.0), (4.2, 10.0)],
            BLACK.mix(0.4).stroke_width(1),
        ))?
        .label("chance (10 classes)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK.mix(0.4)));
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerLeft)
        .draw()?;
    root.present()?;
    Ok(())
}
