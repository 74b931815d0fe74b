//! `weir profile`: SERF's profile of every model node of a graph, saved beside it.

use std::path::PathBuf;

use crate::profile::{
    available_cores, describe, load_for_profiling, measured_in, parse_seconds, profile_node,
    profile_path, select_nodes, ProfileOptions,
};
use anyhow::Result;
use clap::Args;

use super::files::load_error;

#[derive(Debug, Args)]
pub(super) struct ProfileArgs {
    /// Graph YAML file; profiles go next to it.
    graph: PathBuf,
    /// Profile only this model node.
    #[arg(long)]
    node: Option<String>,
    /// Measured requests per tuple (the paper: 10).
    #[arg(long, default_value_t = 10)]
    samples: usize,
    /// Interleaved rounds the samples are split across; each tuple keeps its median round.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Cores to plan for (default: all available).
    #[arg(long)]
    cores: Option<usize>,
    /// Measure bare sessions back to back (the paper's way) instead of the node's executor in a
    /// running one-node graph.
    #[arg(long)]
    bare_sessions: bool,
    /// Seconds of idle time between two rounds (default: back to back): spreads the rounds over
    /// minutes on a host whose speed moves at that scale (costs wall time only).
    #[arg(long, value_parser = parse_seconds, default_value = "0")]
    round_gap: std::time::Duration,
}

/// Profiles each model node asked for and saves its profile as `<graph dir>/<node>.serf.json`.
pub(super) fn run(args: ProfileArgs) -> Result<()> {
    let graph = load_for_profiling(&args.graph).map_err(load_error)?;
    for node in select_nodes(&graph.plan, args.node.as_deref())? {
        let options = ProfileOptions {
            cores: args.cores.unwrap_or_else(available_cores).max(1),
            samples: args.samples.max(1),
            rounds: args.rounds.max(1),
            spinning: node.spinning,
            pin_cores_from: node.pin_cores_from,
            measure_in: measured_in(args.bare_sessions),
            round_gap: args.round_gap,
            ..ProfileOptions::default()
        };
        let profile = profile_node(&node.id, &node.path, &options)?;
        let out = profile_path(&args.graph, &node.id);
        profile.save(&out)?;
        print!("{}", describe(&profile)?);
        println!("saved {}\n", out.display());
    }
    Ok(())
}
