//! `weir-bench draft`: an image classifier graph decoding camera JPEGs whole against decoding
//! them at a reduced DCT scale (`decode_image`'s `draft`).

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;

use crate::draft::{draft, draft_table, plot_draft, DraftConfig, SIDE};

#[derive(Debug, Args)]
pub(super) struct DraftArgs {
    /// A JPEG photo (repeatable); by default the camera photos the `image` and `jpeg-decoder`
    /// crates ship in their sources (found in cargo's registry, which building weir fills).
    #[arg(long = "photo")]
    photos: Vec<PathBuf>,
    /// The classifier (default: the zoo's squeezenet).
    #[arg(long)]
    model: Option<PathBuf>,
    /// Requests per photo, side and repeat.
    #[arg(long, default_value_t = 20)]
    requests: usize,
    /// Repeats (the two graphs alternate); medians are reported.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Where to save a PNG plot.
    #[arg(long, default_value = "benchmarks/jpeg_draft/jpeg_draft.png")]
    plot: PathBuf,
}

/// The photos the crates weir builds with carry in their published sources: a 12-megapixel
/// phone photo (`image`'s scale-down example), a 3.4-megapixel one and a 512 × 512 one
/// (`jpeg-decoder`'s benchmarks).
fn registry_photos() -> Vec<PathBuf> {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .unwrap_or_default();
    let wanted = [
        "image-0.24.9/examples/scaledown/test.jpg",
        "jpeg-decoder-0.3.2/benches/large_image.jpg",
        "jpeg-decoder-0.3.2/benches/tower.jpg",
    ];
    let Ok(registries) = std::fs::read_dir(cargo_home.join("registry/src")) else {
        return Vec::new();
    };
    let registries: Vec<PathBuf> = registries.flatten().map(|e| e.path()).collect();
    wanted
        .iter()
        .filter_map(|w| registries.iter().map(|r| r.join(w)).find(|p| p.is_file()))
        .collect()
}

pub(super) fn run(args: DraftArgs) -> Result<()> {
    let photos = if args.photos.is_empty() {
        registry_photos()
    } else {
        args.photos
    };
    if photos.is_empty() {
        bail!("no photos: give --photo, or build weir first so cargo's registry holds the crates' sources");
    }
    let config = DraftConfig {
        model: args
            .model
            .unwrap_or_else(|| crate::weir_home().join("zoo").join("squeezenet.onnx")),
        photos,
        requests: args.requests.max(1),
        repeats: args.repeats.max(1),
    };
    let rows = draft(&config)?;
    super::print_machine(Some(format!(
        "decode_image → resize {SIDE}×{SIDE} → cast → transpose → normalize → squeezenet (1 session × 1 intra-op thread), in-process, one client; whole decode against draft {SIDE}×{SIDE}, alternating; {} requests per side and repeat, median of {} repeats; load average {}",
        config.requests,
        config.repeats,
        super::load_average()
    )))?;
    print!("{}", draft_table(&rows));
    super::write_plot(&args.plot, |p| plot_draft(&rows, p));
    Ok(())
}
