//! Unit tests of the parity encoders, training and the degraded-mode accuracy scoring.

use super::*;
use crate::architecture::Architecture;
use crate::data::tests::synthetic;
use crate::model::without_softmax_tail;

#[test]
fn sum_encoder_adds_feature_wise() {
    let (a, b, c) = ([1.0, 2.0, 3.0, 4.0], [10.0, 20.0, 30.0, 40.0], [0.5; 4]);
    let mut out = [9.0; 4];
    Encoder::Sum.encode_into(&[&a, &b, &c], &mut out);
    assert_eq!(out, [11.5, 22.5, 33.5, 44.5]);
}

#[test]
fn concat_encoder_tiles_downsampled_images() {
    // 4×4 images: image i has value 10·i + (pixel index)
    let imgs: Vec<Vec<f32>> = (0..4)
        .map(|i| (0..16).map(|p| (10 * i + p) as f32).collect())
        .collect();
    let rows: Vec<&[f32]> = imgs.iter().map(Vec::as_slice).collect();
    let mut out = [0.0; 16];
    Encoder::Concat.encode_into(&rows[..2], &mut out);
    // row 0: (0+1)/2, (2+3)/2 from image 0, then (10+11)/2, (12+13)/2 from image 1
    assert_eq!(&out[..4], &[0.5, 2.5, 10.5, 12.5]);
    Encoder::Concat.encode_into(&rows, &mut out);
    // row 0: 2×2 blocks of image 0 (mean of 0, 1, 4, 5 = 2.5; …), then of image 1
    assert_eq!(&out[..4], &[2.5, 4.5, 12.5, 14.5]);
    // row 3: the lower blocks of image 2 (bottom left), then of image 3 (bottom right)
    assert_eq!(&out[12..], &[30.5, 32.5, 40.5, 42.5]);
    assert!(Encoder::Concat.check(3, 16).is_err());
    assert!(Encoder::Concat.check(2, 15).is_err());
    assert!(Encoder::Sum.check(1, 16).is_err());
}

/// A linear (affine) deployed model F(x) = Wx + b and the parity model F_P(x) = Wx + k·b
/// decode exactly (the subtraction undoes the sum of linear outputs), so A_d equals the
/// deployed accuracy.
#[test]
fn affine_model_decodes_exactly() {
    let data = synthetic(120, 64, 10, 0.3, 3);
    let arch = Architecture::Mlp { hidden: vec![] };
    let proto = without_softmax_tail(&arch.build(64, 10).unwrap());
    let deployed = OnnxModel::from_proto(proto).unwrap();
    deployed
        .reinitialize(crate::model::Init::Xavier, &mut StdRng::seed_from_u64(1))
        .unwrap();
    let bias = Tensor::from_vec((0..10).map(|i| i as f32 * 0.01).collect(), 10, &Device::Cpu);
    deployed.params()[1].1.set(&bias.unwrap()).unwrap();
    for k in [2, 3, 4] {
        // independent Vars holding W and k·b
        let parity = OnnxModel::from_proto(deployed.to_proto().unwrap()).unwrap();
        let b = deployed.params()[1].1.as_tensor();
        parity.params()[1].1.set(&(b * k as f64).unwrap()).unwrap();
        let a_d = degraded_accuracy(&deployed, &parity, k, Encoder::Sum, &data, 5).unwrap();
        // 120 rows split evenly into groups for k = 2, 3, 4: every row is reconstructed once
        let a_a = accuracy(&deployed, &data).unwrap();
        assert_eq!(a_d, a_a, "k = {k}");
        // r = 2: parity model 1 holds W and Σ_i (i + 1)·b; two lost per group decode exactly.
        let second = OnnxModel::from_proto(deployed.to_proto().unwrap()).unwrap();
        let weight: f64 = weir_parm::coefficients(1, k)
            .iter()
            .map(|&c| f64::from(c))
            .sum();
        second.params()[1].1.set(&(b * weight).unwrap()).unwrap();
        let both = degraded_accuracy_lost(
            &deployed,
            &[(0, &parity), (1, &second)],
            (k, Encoder::Sum),
            &data,
            (5, 3),
        )
        .unwrap();
        assert!(
            (both.mean - a_a).abs() < 1e-6 && both.std < 1e-6,
            "k = {k}: {both:?}"
        );
    }
}

#[test]
fn spread_of_known_scores() {
    let d = DegradedAccuracy::of_scores(&[0.5, 0.7, 0.9], 7).unwrap();
    assert!(
        (d.mean - 0.7).abs() < 1e-6 && (d.std - 0.2).abs() < 1e-6,
        "{d:?}"
    );
    assert_eq!((d.min, d.max, d.groupings, d.seed), (0.5, 0.9, 3, 7));
    assert_eq!(d.to_string(), "70.0 % ± 20.0 (50.0–90.0)");
    let one = DegradedAccuracy::of_scores(&[0.8], 1).unwrap();
    assert_eq!((one.mean, one.std, one.min, one.max), (0.8, 0.0, 0.8, 0.8));
    assert!(DegradedAccuracy::of_scores(&[], 0).is_none());
}

/// A briefly trained parity model decodes imperfectly, so A_d depends on which rows share a
/// group: the spread over groupings is exactly the statistics of the single groupings seeded
/// `seed + g`, the same on every call.
#[test]
fn spread_aggregates_the_seeded_groupings() {
    // 50 held-out rows: k = 3 leaves two out, so a grouping also picks which rows are scored
    let split = synthetic(250, 64, 10, 0.45, 4).split(0.2, 1).unwrap();
    let (deployed, a_a) = fit_classifier_for_test(&Architecture::Mlp { hidden: vec![] }, &split);
    let schedule = Schedule {
        epochs: 3,
        batch_size: 16,
        learning_rate: 1e-2,
        seed: 3,
        ..Schedule::default()
    };
    let (seed, groupings) = (11u64, 6usize);
    for k in [2, 3] {
        let (parity, _) =
            fit_parity(&deployed, k, Encoder::Sum, &schedule, &split, |_| ()).unwrap();
        let spread = |parity: &OnnxModel| {
            degraded_accuracy_spread(
                &deployed,
                parity,
                k,
                Encoder::Sum,
                &split.test,
                seed,
                groupings,
            )
            .unwrap()
        };
        let d = spread(&parity);
        let single: Vec<f32> = (0..groupings as u64)
            .map(|g| {
                degraded_accuracy(&deployed, &parity, k, Encoder::Sum, &split.test, seed + g)
                    .unwrap()
            })
            .collect();
        assert_eq!(
            d,
            DegradedAccuracy::of_scores(&single, seed).unwrap(),
            "k = {k}"
        );
        assert!(
            d.std > 0.0 && d.min < d.max,
            "k = {k}: groupings alike: {d:?}"
        );
        assert!(d.mean > 0.1 && d.mean < a_a, "k = {k}: {d:?}, A_a {a_a}");
        assert_eq!(spread(&parity), d, "k = {k}: not deterministic");
    }
}

#[test]
fn parity_training_lowers_the_mse_and_beats_chance() {
    let split = synthetic(400, 64, 10, 0.3, 7).split(0.25, 2).unwrap();
    let schedule = Schedule {
        epochs: 8,
        batch_size: 16,
        learning_rate: 1e-2,
        seed: 1,
        ..Schedule::default()
    };
    let (deployed, _) = fit_classifier_for_test(&Architecture::Mlp { hidden: vec![32] }, &split);
    let mut seen = Vec::new();
    let (parity, report) = fit_parity(&deployed, 2, Encoder::Sum, &schedule, &split, |p| {
        seen.push(*p)
    })
    .unwrap();
    assert_eq!(seen.len(), 8);
    assert!(report.final_loss < 0.5 * seen[0].loss, "{seen:?}");
    assert!(report.degraded_accuracy > 0.3, "{report:?}");
    assert!(report.deployed_accuracy > report.degraded_accuracy);
    assert_eq!(parity.param_shapes(), deployed.param_shapes());
    let a_o = report.overall_accuracy(0.1);
    assert!((a_o - (0.9 * report.deployed_accuracy + 0.1 * report.degraded_accuracy)).abs() < 1e-6);
}

/// The numpy-trained `digits_mlp.onnx` of `scripts/make_models.py` (IR 8, Gemm with transB,
/// final Softmax) gets a parity model through the file API. Needs `scripts/setup.sh`'s
/// outputs (CI runs it first); skipped without them.
#[test]
fn parity_for_the_setup_digits_mlp() {
    let weir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.weir");
    let (deployed, digits) = (
        weir.join("models/digits_mlp.onnx"),
        weir.join("data/digits.csv.gz"),
    );
    if !deployed.exists() || !digits.exists() {
        eprintln!("skipped: run scripts/setup.sh for {}", deployed.display());
        return;
    }
    let dir = std::env::temp_dir().join(format!("weir-training-parity-{}", std::process::id()));
    let mut opts = ParityOptions::new(&deployed, 2, &digits, dir.join("p.onnx"));
    opts.schedule.epochs = 3;
    let mut seen = Vec::new();
    let report = train_parity(&opts, |p| seen.push(*p)).unwrap();
    assert!(seen[2].loss < seen[0].loss, "{seen:?}");
    assert!(report.deployed_accuracy > 0.9, "{report:?}");
    let (d, p) = (
        OnnxModel::load(&deployed).unwrap(),
        OnnxModel::load(&report.out).unwrap(),
    );
    assert_eq!(d.node_ops(), ["Gemm", "Relu", "Gemm", "Softmax"]);
    assert_eq!(p.node_ops(), ["Gemm", "Relu", "Gemm"]);
    assert_eq!(p.param_shapes(), d.param_shapes());
    assert_eq!((p.input_name(), p.output_name()), ("x", "probs"));
    std::fs::remove_dir_all(dir).unwrap();
}

fn fit_classifier_for_test(arch: &Architecture, split: &Split) -> (OnnxModel, f32) {
    let schedule = Schedule {
        epochs: 10,
        learning_rate: 1e-2,
        ..Schedule::default()
    };
    let (m, r) = crate::classifier::fit_classifier(arch, &schedule, split, |_| ()).unwrap();
    (m, r.test_accuracy)
}
