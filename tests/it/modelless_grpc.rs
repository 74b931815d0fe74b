//! Model-less queries over gRPC through a real `weir serve --repository --http --grpc` (INFaaS
//! §3.1's query modes and §4.1's selection, on the second transport): the digits architectures
//! registered with the real `weir model register`, then `ModelInfer` and `ModelStreamInfer` on the
//! task with the requirements in the request's `parameters` map. The pick meets the accuracy asked,
//! is a cold start once and warm after, its outputs are the HTTP answer's for the same input and
//! ONNX Runtime's on the variant's file; an explicit variant is served as named; impossible
//! requirements and parameters of the wrong type are INVALID_ARGUMENT naming the closest variant or
//! the field; a task is ready and reads as a model of version 1 (metadata, configuration and
//! statistics, equal over both transports, counting each request once). Triton's own client (`tritonclient.grpc`,
//! through `tests/python/grpc_client.py modelless`) sends the requirements with its `parameters=`
//! argument and gets the same answers.

use crate::common::{assert_close, direct_ort};
use crate::grpc::{channel, runtime, Served};
use crate::modelless_serve::{
    dynamic_file, floats_of, query_at, served_variant, tiny, Registered, PIXELS,
};
use serde_json::json;
use tonic::transport::Channel;
use tonic::Code;
use weir_connectors::grpc::proto::grpc_inference_service_client::GrpcInferenceServiceClient;
use weir_connectors::grpc::proto::infer_parameter::ParameterChoice;
use weir_connectors::grpc::proto::model_infer_request::InferInputTensor;
use weir_connectors::grpc::proto::{
    InferParameter, ModelInferRequest, ModelInferResponse, ModelMetadataRequest, ModelReadyRequest,
    ModelStatisticsRequest,
};

type Client = GrpcInferenceServiceClient<Channel>;

fn request(model: &str, parameters: Vec<(&str, Option<ParameterChoice>)>) -> ModelInferRequest {
    ModelInferRequest {
        model_name: model.into(),
        id: "q".into(),
        parameters: parameters
            .into_iter()
            .map(|(k, c)| {
                (
                    k.to_string(),
                    InferParameter {
                        parameter_choice: c,
                    },
                )
            })
            .collect(),
        inputs: vec![InferInputTensor {
            name: "x".into(),
            datatype: "FP32".into(),
            shape: vec![1, 64],
            ..Default::default()
        }],
        raw_input_contents: vec![PIXELS.iter().flat_map(|v| v.to_le_bytes()).collect()],
        ..Default::default()
    }
}

/// The reply's variant and whether it was a cold start.
fn variant_of(reply: &ModelInferResponse) -> (String, bool) {
    let get = |key: &str| {
        reply
            .parameters
            .get(key)
            .and_then(|p| p.parameter_choice.clone())
            .unwrap_or_else(|| panic!("`{key}` in the reply's parameters: {reply:?}"))
    };
    match (get("variant"), get("cold_start")) {
        (ParameterChoice::StringParam(v), ParameterChoice::BoolParam(cold)) => (v, cold),
        other => panic!("variant and cold_start of the wrong types: {other:?}"),
    }
}

fn floats(reply: &ModelInferResponse) -> Vec<f32> {
    reply.raw_output_contents[0]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

async fn infer(
    client: &mut Client,
    model: &str,
    parameters: Vec<(&str, Option<ParameterChoice>)>,
) -> Result<ModelInferResponse, tonic::Status> {
    client
        .model_infer(request(model, parameters))
        .await
        .map(tonic::Response::into_inner)
}

fn double(x: f64) -> Option<ParameterChoice> {
    Some(ParameterChoice::DoubleParam(x))
}

fn text(s: &str) -> Option<ParameterChoice> {
    Some(ParameterChoice::StringParam(s.into()))
}

#[test]
fn tasks_over_grpc_pick_load_and_refuse_as_over_http() {
    let Registered {
        dir: _dir,
        root,
        repo,
        candidates,
    } = Registered::new("modelless-grpc");
    let server = Served::start(&[], &["--repository", &root.display().to_string()]);
    let (tight, over_http) = runtime().block_on(async {
        let mut client = GrpcInferenceServiceClient::new(channel(&server.grpc).await);

        // Tight: a variant at 0.98 or better, loaded on this first query, warm on the next (§4.1).
        let first = infer(&mut client, "digits", vec![("min_accuracy", double(0.98))])
            .await
            .expect("a variant meets 0.98");
        let (tight, cold) = variant_of(&first);
        assert!(cold, "the first query of a variant is a cold start");
        let v = repo.variant(&tight).expect("chosen variant is registered");
        assert!(v.accuracy >= 0.98, "{tight} has accuracy {}", v.accuracy);
        assert_eq!(first.model_name, "digits");
        assert_eq!(first.id, "q");
        let want = direct_ort(&dynamic_file(&repo, &candidates, v), "x", &[1, 64], &PIXELS);
        assert_close(&floats(&first), &want, 1e-5, "the chosen variant's outputs");
        let again = infer(&mut client, "digits", vec![("min_accuracy", double(0.98))])
            .await
            .expect("again");
        assert_eq!(variant_of(&again), (tight.clone(), false));

        // The same query over HTTP is answered by the same (now active) variant, identically.
        let (status, reply) = query_at(&server.http, "digits", json!({"min_accuracy": 0.98}));
        assert_eq!(status, 200, "{reply}");
        assert_eq!(served_variant(&reply), (tight.clone(), false));
        let over_http = floats_of(&reply["outputs"][0]["data"]);
        assert_eq!(floats(&again), over_http, "gRPC and HTTP answers");

        // Explicit: as a parameter of the task, and as the model's name (the explicit mode of
        // §3.1).
        let tiny = tiny(&candidates);
        let reply = infer(&mut client, "digits", vec![("variant", text(&tiny))])
            .await
            .expect("explicit variant");
        assert_eq!(variant_of(&reply).0, tiny);
        let reply = infer(&mut client, &tiny, vec![]).await.expect("by name");
        assert_eq!(variant_of(&reply).0, tiny);

        // Impossible requirements name the closest variant (§4.1).
        let e = infer(
            &mut client,
            "digits",
            vec![("min_accuracy", double(0.9999))],
        )
        .await
        .expect_err("nothing is that accurate");
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        assert!(e.message().contains("closest variant: digits_"), "{e}");

        // Parameters of the wrong type, or none JSON can carry, name their field.
        for (parameters, field) in [
            (
                vec![("min_accuracy", text("high"))],
                "parameters.min_accuracy",
            ),
            (
                vec![("latency_ms", Some(ParameterChoice::Int64Param(-3)))],
                "parameters.latency_ms",
            ),
            (vec![("variant", text("nope"))], "parameters.variant"),
            (
                vec![("variant", Some(ParameterChoice::Int64Param(7)))],
                "parameters.variant",
            ),
            (vec![("latency_ms", None)], "parameters.latency_ms"),
            (
                vec![("min_accuracy", double(f64::NAN))],
                "parameters.min_accuracy",
            ),
        ] {
            let what = format!("{parameters:?}");
            let e = infer(&mut client, "digits", parameters)
                .await
                .expect_err(&what);
            assert_eq!(e.code(), Code::InvalidArgument, "{what} → {e}");
            assert!(e.message().contains(field), "{what} → {e}");
        }
        let many: Vec<(String, Option<ParameterChoice>)> = (0..1000)
            .map(|i| (format!("k{i}"), Some(ParameterChoice::BoolParam(true))))
            .collect();
        let e = infer(
            &mut client,
            "digits",
            many.iter().map(|(k, c)| (k.as_str(), c.clone())).collect(),
        )
        .await
        .expect_err("a thousand parameters");
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        let e = infer(&mut client, "nothing", vec![])
            .await
            .expect_err("unknown");
        assert_eq!(e.code(), Code::NotFound, "{e}");

        // On a stream too, each answer carrying its variant.
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        for id in ["s1", "s2"] {
            let mut r = request("digits", vec![("min_accuracy", double(0.98))]);
            r.id = id.into();
            tx.send(r).await.expect("queued");
        }
        drop(tx);
        let mut replies = client
            .model_stream_infer(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
            .expect("stream opens")
            .into_inner();
        let mut ids = Vec::new();
        while let Some(reply) = replies.message().await.expect("stream reply") {
            assert_eq!(reply.error_message, "", "{reply:?}");
            let reply = reply.infer_response.expect("a response");
            assert_eq!(variant_of(&reply), (tight.clone(), false));
            ids.push(reply.id);
        }
        ids.sort();
        assert_eq!(ids, ["s1", "s2"]);

        // A task is ready while the server is, and reads as a model of version 1: its variants
        // share the task's signature, so metadata, configuration and statistics answer for it.
        let ready = client
            .model_ready(ModelReadyRequest {
                name: "digits".into(),
                version: String::new(),
            })
            .await
            .expect("ready")
            .into_inner();
        assert!(ready.ready);
        let (status, _) =
            crate::serve::http(&server.http, "GET", "/v2/models/digits/ready", &[], b"");
        assert_eq!(status, 200, "a task is ready over HTTP too");
        task_reads_as_a_model(&mut client, &server.http, &tiny).await;
        (tight, over_http)
    });

    // Triton's own client, with its `parameters=` argument, gets the same answers.
    let triton = server.client("modelless", &[]);
    assert_eq!(triton["variant"], json!(tight), "{triton}");
    assert_eq!(triton["cold_start"], json!(false), "{triton}");
    assert_eq!(
        floats_of(&triton["outputs"]),
        over_http,
        "tritonclient's and HTTP's answers"
    );
    let impossible = triton["impossible"].as_str().unwrap_or_default();
    assert!(impossible.contains("closest variant: digits_"), "{triton}");
    let wrong = triton["wrong_type"].as_str().unwrap_or_default();
    assert!(wrong.contains("parameters.min_accuracy"), "{triton}");
}

/// Triton's statistics of `name` over gRPC: (successes, failures, rows).
async fn counts(client: &mut Client, name: &str) -> (u64, u64, u64) {
    let stats = client
        .model_statistics(ModelStatisticsRequest {
            name: name.into(),
            version: String::new(),
        })
        .await
        .expect("statistics")
        .into_inner();
    assert_eq!(stats.model_stats.len(), 1, "{stats:?}");
    let s = &stats.model_stats[0];
    assert_eq!((s.name.as_str(), s.version.as_str()), (name, "1"));
    let i = s.inference_stats.as_ref().expect("inference stats");
    let count = |d: &Option<weir_connectors::grpc::proto::StatisticDuration>| {
        d.as_ref().map_or(0, |d| d.count)
    };
    (count(&i.success), count(&i.fail), s.inference_count)
}

/// The task `digits` (and its variant `variant`) read as models over gRPC and HTTP alike.
async fn task_reads_as_a_model(client: &mut Client, http: &str, variant: &str) {
    let meta = client
        .model_metadata(ModelMetadataRequest {
            name: "digits".into(),
            version: String::new(),
        })
        .await
        .expect("a task's metadata")
        .into_inner();
    assert_eq!(meta.versions, ["1"]);
    assert_eq!(meta.platform, "weir_modelless");
    let inputs: Vec<_> = meta
        .inputs
        .iter()
        .map(|t| (t.name.as_str(), t.datatype.as_str(), t.shape.clone()))
        .collect();
    assert_eq!(inputs, [("x", "FP32", vec![-1, 64])]);
    assert!(!meta.outputs.is_empty(), "{meta:?}");
    let (status, body) = crate::serve::http(http, "GET", "/v2/models/digits", &[], b"");
    assert_eq!(status, 200);
    let over_http: serde_json::Value = serde_json::from_str(&body).expect("JSON metadata");
    assert_eq!(
        over_http["inputs"][0]["shape"],
        json!([-1, 64]),
        "{over_http}"
    );
    assert_eq!(over_http["outputs"][0]["name"], json!(meta.outputs[0].name));

    // The configuration: the rows a request may carry, the task's tensors without the batch.
    let (status, body) = crate::serve::http(http, "GET", "/v2/models/digits/config", &[], b"");
    assert_eq!(status, 200);
    let config: serde_json::Value = serde_json::from_str(&body).expect("JSON config");
    assert_eq!(
        config["input"][0],
        json!({"name": "x", "data_type": "TYPE_FP32", "dims": [64], "optional": false})
    );
    assert!(
        config["max_batch_size"].as_u64().unwrap_or(0) >= 1,
        "{config}"
    );
    let proto = client
        .model_config(weir_connectors::grpc::proto::ModelConfigRequest {
            name: "digits".into(),
            version: "1".into(),
        })
        .await
        .expect("a task's config over gRPC")
        .into_inner();
    assert!(!proto.config.is_empty(), "an encoded ModelConfig");
    let (status, _) = crate::serve::http(http, "GET", "/v2/models/digits/versions/2", &[], b"");
    assert_eq!(status, 404, "a task is served as version 1 only");
    let e = client
        .model_metadata(ModelMetadataRequest {
            name: variant.into(),
            version: String::new(),
        })
        .await
        .expect("a variant named directly is a model too")
        .into_inner();
    assert_eq!(e.platform, "onnxruntime_onnx");

    // Statistics count each request once, whichever transport, and agree over both.
    let (ok, failed, rows) = counts(client, "digits").await;
    assert!(ok >= 3 && failed >= 1, "{ok} answered, {failed} failed");
    infer(client, "digits", vec![("min_accuracy", double(0.98))])
        .await
        .expect("one more");
    let (status, _) = query_at(http, "digits", json!({"min_accuracy": 0.98}));
    assert_eq!(status, 200);
    assert_eq!(counts(client, "digits").await, (ok + 2, failed, rows + 2));
    let (status, body) = crate::serve::http(http, "GET", "/v2/models/digits/stats", &[], b"");
    assert_eq!(status, 200);
    let doc: serde_json::Value = serde_json::from_str(&body).expect("JSON stats");
    let s = &doc["model_stats"][0];
    assert_eq!(
        s["inference_stats"]["success"]["count"],
        json!(ok + 2),
        "{doc}"
    );
    assert_eq!(s["inference_count"], json!(rows + 2), "{doc}");
    let (status, body) = crate::serve::http(http, "GET", "/v2/models/stats", &[], b"");
    assert_eq!(status, 200);
    let all: serde_json::Value = serde_json::from_str(&body).expect("JSON stats");
    let names: Vec<_> = all["model_stats"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["name"].as_str())
        .collect();
    assert!(
        names.contains(&"digits") && names.contains(&variant),
        "{names:?}"
    );
}
