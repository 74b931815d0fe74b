//! weir's integration tests: one binary (see DEVELOPERS.md: every extra binary relinks everything).
//! They need `scripts/setup.sh` to have run (the README's test command does it first).

mod builder;
mod cli;
mod common;
mod distributed;
mod dtypes;
mod equality;
mod fan_in;
mod fanout;
mod golden;
mod graph_inputs;
mod graphs;
mod grpc;
mod hams;
mod hams_recovery;
mod hostile_http;
mod hostile_requests;
mod hostile_streams;
mod hostile_zenoh;
mod image_ops;
mod invalid;
mod kairos;
mod parity;
mod pretrained;
mod reference;
mod remote_types;
mod requests;
mod sequences;
mod serf;
mod serve;
mod shapes;
mod streams;
mod text_ops;
