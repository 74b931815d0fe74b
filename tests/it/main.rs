//! weir's integration tests: one binary, since every extra test binary relinks the whole
//! dependency tree. They need `scripts/setup.sh` to have run (the README's test command does it
//! first).

#![allow(clippy::unwrap_used)]

mod autoscale;
mod builder;
mod cli;
mod common;
mod deadlines;
mod distributed;
mod dtypes;
mod equality;
mod fan_in;
mod fanout;
mod faults;
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
mod model_control;
mod model_repository;
mod modelless;
mod modelless_grpc;
mod modelless_image;
mod modelless_remote;
mod modelless_serve;
mod ocr;
mod offline;
mod ops;
mod parity;
mod pretrained;
mod reference;
mod region_ops;
mod remote_types;
mod requests;
mod sequences;
mod serf;
mod serve;
mod shapes;
mod streams;
mod text_decode;
mod text_graph;
mod text_ops;
mod tls;
mod triton_repository;
mod triton_tools;
mod ui;
