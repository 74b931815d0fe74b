//! Generates the gRPC messages and services of `proto/` (the Open Inference Protocol's
//! `inference.GRPCInferenceService` and `grpc.health.v1`) with tonic and prost.
//!
//! prost needs `protoc`. `scripts/setup.sh` unpacks one into `.weir/protoc/` and
//! `.cargo/config.toml` hands it over as `PROTOC`; without it the build stops here with a message
//! saying so, rather than with prost's own search failing somewhere else.

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=proto/grpc_service.proto");
    println!("cargo:rerun-if-changed=proto/health.proto");
    println!("cargo:rerun-if-env-changed=PROTOC");
    let protoc = std::env::var_os("PROTOC").filter(|p| Path::new(p).is_file());
    if protoc.is_none() {
        eprintln!(
            "error: no protoc for weir-connectors' gRPC code: PROTOC is unset or names no file \
             ({:?}). Run scripts/setup.sh first (it unpacks protoc into .weir/protoc/, which \
             .cargo/config.toml points PROTOC at), or set PROTOC to a protoc binary.",
            std::env::var_os("PROTOC")
        );
        std::process::exit(1);
    }
    if let Err(e) = tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .build_transport(false)
        // Raw tensor contents as `Bytes`: decoded as slices of the received buffer (no copy per
        // tensor), and a prepared request is cloned by reference count.
        .bytes(".inference.ModelInferRequest.raw_input_contents")
        .bytes(".inference.ModelInferResponse.raw_output_contents")
        .compile_protos(
            &["proto/grpc_service.proto", "proto/health.proto"],
            &["proto"],
        )
    {
        eprintln!("error: generating the gRPC code from connectors/proto: {e}");
        std::process::exit(1);
    }
}
