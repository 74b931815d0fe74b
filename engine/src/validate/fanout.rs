//! One-to-many nodes (`crop_boxes`, `gather`): their settings, their types, and the levels rule.
//!
//! Rules: `crop_boxes` reads a `u8` or `f32` image of rank 3, boxes `f32 [n, 4]` and optional
//! scores `f32 [n]`; `height` and `width` ≥ 1, `min_score` finite, `iou_threshold` in `(0, 1]`,
//! `max_boxes` in `1..=`[`MAX_PARTS`]. Its outputs are per part: `image [height, width, c]`,
//! `box f32 [4]`, `score f32 []`. `gather` has at least one input and none named `count`; output
//! `name` is its input's type with a free first dimension, plus `count` (`i64 []`).
//!
//! Levels: every tensor sits inside zero or more fan-outs (a stack of `crop_boxes` nodes). A
//! node's inputs must all sit at one level, since a row of one level has no single partner at
//! another; `crop_boxes` pushes itself, `gather` pops the innermost fan-out (which it then
//! closes), and graph outputs sit at no fan-out. A stateful model may not sit inside a fan-out:
//! its state would advance once per part, an order no client chose.

use super::{node_path, CheckedKind, Port, TensorOp, TypedNode, Validator};
use crate::diagnostic::Location;
use crate::spec::{BoxCoordinates, CropBoxesSpec, GatherSpec, Interpolation, NodeSpec, MAX_PARTS};
use crate::tensor::{DType, Dim, TensorType};
use crate::validate::{GraphOutput, Producer};

/// `crop_boxes`, checked: what the operator computes.
#[derive(Debug, Clone, PartialEq)]
pub struct CropBoxesOp {
    /// Whether the image has scores to read (a third input).
    pub scored: bool,
    /// Whether the boxes are a graph input, so boxes that do not fit are the client's fault.
    pub client_boxes: bool,
    /// How the boxes are written.
    pub coordinates: BoxCoordinates,
    /// Crop height.
    pub height: usize,
    /// Crop width.
    pub width: usize,
    /// How a crop is resized.
    pub interpolation: Interpolation,
    /// Lowest score kept.
    pub min_score: f32,
    /// Non-maximum suppression threshold, if any.
    pub iou_threshold: Option<f32>,
    /// Most parts per request.
    pub max_boxes: usize,
}

/// `gather`, checked: the fan-out it closes, once the levels pass has found it.
#[derive(Debug, Clone, PartialEq)]
pub struct GatherCheck {
    /// Index (in the validated node order) of the `crop_boxes` node whose parts it joins.
    pub fanout: usize,
}

impl Validator<'_, '_> {
    /// A one-to-many node's settings, before its inputs are known.
    pub(super) fn check_fanout_fields(&mut self, node: &NodeSpec) {
        let id = node.id().value.as_str();
        match node {
            NodeSpec::CropBoxes(c) => self.check_crop_boxes_fields(id, c),
            NodeSpec::Gather(g) => self.check_gather_fields(id, g, node),
            _ => {}
        }
    }

    fn check_crop_boxes_fields(&mut self, id: &str, c: &CropBoxesSpec) {
        for (field, v) in [("height", &c.height), ("width", &c.width)] {
            if v.value == 0 {
                self.error(
                    node_path(id, field),
                    v.location,
                    format!("node `{id}`: `{field}` must be at least 1"),
                );
            }
        }
        if !c.min_score.value.is_finite() {
            self.error(
                node_path(id, "min_score"),
                c.min_score.location,
                format!("node `{id}`: `min_score` must be a finite number"),
            );
        }
        if let Some(t) = &c.iou_threshold {
            if !(t.value > 0.0 && t.value <= 1.0) {
                self.error(
                    node_path(id, "iou_threshold"),
                    t.location,
                    format!(
                        "node `{id}`: `iou_threshold` must be in (0, 1], got {}",
                        t.value
                    ),
                );
            }
        }
        if c.max_boxes.value == 0 || c.max_boxes.value > MAX_PARTS {
            self.error(
                node_path(id, "max_boxes"),
                c.max_boxes.location,
                format!(
                    "node `{id}`: `max_boxes` must be between 1 and {MAX_PARTS}, got {}",
                    c.max_boxes.value
                ),
            );
        }
    }

    fn check_gather_fields(&mut self, id: &str, g: &GatherSpec, node: &NodeSpec) {
        if g.inputs.is_empty() {
            self.error(
                node_path(id, "inputs"),
                node.id().location,
                format!("node `{id}`: `inputs` names no tensor to gather"),
            );
        }
        if let Some(r) = g.inputs.get("count") {
            self.error(
                node_path(id, "inputs.count"),
                r.location,
                format!(
                    "node `{id}`: `count` is the gather's own output (how many parts each request had); name this input otherwise"
                ),
            );
        }
    }

    /// `crop_boxes`'s op and per-part outputs from its resolved `ports` (image, boxes, scores).
    pub(super) fn type_crop_boxes(
        &mut self,
        c: &CropBoxesSpec,
        ports: &[Port],
        locs: &[Location],
    ) -> Option<(TensorOp, Vec<(String, TensorType)>)> {
        let id = c.id.value.as_str();
        let image = &ports[0];
        let mut ok = true;
        if !matches!(image.ty.dtype, DType::U8 | DType::F32) || image.ty.shape.len() != 3 {
            self.wrong_port(
                id,
                image,
                locs[0],
                "a u8 or f32 image of shape [height, width, channels]",
            );
            ok = false;
        }
        let boxes = &ports[1];
        let four = matches!(boxes.ty.shape[..], [_, Dim::Fixed(4) | Dim::Dynamic]);
        if boxes.ty.dtype != DType::F32 || !four {
            self.wrong_port(id, boxes, locs[1], "f32 boxes of shape [n, 4]");
            ok = false;
        }
        if let Some(scores) = ports.get(2) {
            if scores.ty.dtype != DType::F32 || scores.ty.shape.len() != 1 {
                self.wrong_port(id, scores, locs[2], "f32 scores of shape [n]");
                ok = false;
            }
        }
        if !ok {
            return None;
        }
        let op = TensorOp::CropBoxes(CropBoxesOp {
            scored: ports.len() == 3,
            client_boxes: boxes.producer == Producer::Ingress,
            coordinates: c.coordinates.value,
            height: c.height.value,
            width: c.width.value,
            interpolation: c.interpolation.value,
            min_score: c.min_score.value,
            iou_threshold: c.iou_threshold.as_ref().map(|t| t.value),
            max_boxes: c.max_boxes.value,
        });
        let outputs = vec![
            (
                "image".to_string(),
                TensorType {
                    dtype: image.ty.dtype,
                    shape: vec![
                        Dim::Fixed(c.height.value),
                        Dim::Fixed(c.width.value),
                        image.ty.shape[2],
                    ],
                },
            ),
            ("box".to_string(), TensorType::fixed(DType::F32, &[4])),
            ("score".to_string(), TensorType::fixed(DType::F32, &[])),
        ];
        Some((op, outputs))
    }

    /// A `gather` node from its resolved `ports` (in `inputs` name order); its fan-out is found by
    /// [`Validator::check_levels`].
    pub(super) fn type_gather<'a>(&mut self, g: &GatherSpec, ports: Vec<Port>) -> TypedNode<'a> {
        let mut outputs: Vec<(String, TensorType)> = g
            .inputs
            .keys()
            .zip(&ports)
            .map(|(name, p)| {
                let mut shape = vec![Dim::Dynamic];
                shape.extend(p.ty.shape.iter().copied());
                (
                    name.clone(),
                    TensorType {
                        dtype: p.ty.dtype,
                        shape,
                    },
                )
            })
            .collect();
        outputs.push(("count".to_string(), TensorType::fixed(DType::I64, &[])));
        TypedNode {
            id: g.id.value.clone(),
            kind: CheckedKind::Gather(GatherCheck { fanout: usize::MAX }),
            inputs: ports,
            outputs,
        }
    }

    /// The levels rule over the typed `nodes` (in order) and `outputs`; sets each gather's fan-out.
    pub(super) fn check_levels(&mut self, nodes: &mut [TypedNode<'_>], outputs: &[GraphOutput]) {
        let mut levels: Vec<Vec<usize>> = Vec::with_capacity(nodes.len());
        let level_of = |levels: &[Vec<usize>], p: Producer| match p {
            Producer::Ingress => Vec::new(),
            Producer::Node(i) => levels.get(i).cloned().unwrap_or_default(),
        };
        for i in 0..nodes.len() {
            let id = nodes[i].id.clone();
            let at = self.node_location(&id);
            let mut input_level: Option<(Vec<usize>, &Port)> = None;
            let mut mixed = false;
            for p in &nodes[i].inputs {
                let l = level_of(&levels, p.producer);
                match &input_level {
                    None => input_level = Some((l, p)),
                    Some((first, fp)) if *first != l => {
                        let (a, b) = (describe_level(nodes, first), describe_level(nodes, &l));
                        let msg = format!(
                            "node `{id}` reads `{}` ({a}) and `{}` ({b}): a node's inputs must sit in the same fan-out; gather the parts first",
                            fp.column, p.column
                        );
                        self.error(node_path(&id, &p.name), at, msg);
                        mixed = true;
                        break;
                    }
                    Some(_) => {}
                }
            }
            let mut level = input_level.map(|(l, _)| l).unwrap_or_default();
            if mixed {
                levels.push(level);
                continue;
            }
            match &mut nodes[i].kind {
                CheckedKind::Op(TensorOp::CropBoxes(_)) => level.push(i),
                CheckedKind::Gather(g) => match level.pop() {
                    Some(fanout) => g.fanout = fanout,
                    None => {
                        self.error(
                            node_path(&id, "inputs"),
                            at,
                            format!("node `{id}` gathers parts, but none of its inputs sits inside a fan-out (a `crop_boxes` node and what follows it)"),
                        );
                    }
                },
                CheckedKind::Model(m) if m.spec.state.is_some() && !level.is_empty() => {
                    let inside = describe_level(nodes, &level);
                    self.error(
                        node_path(&id, "state"),
                        at,
                        format!("node `{id}` is stateful but sits {inside}: its state would advance once per part; gather the parts before it"),
                    );
                }
                _ => {}
            }
            levels.push(level);
        }
        for (k, o) in outputs.iter().enumerate() {
            let l = level_of(&levels, o.producer);
            if !l.is_empty() {
                let at = self
                    .spec
                    .outputs
                    .get(k)
                    .map(|s| s.location)
                    .unwrap_or_default();
                let inside = describe_level(nodes, &l);
                self.error(
                    format!("outputs.{}", o.name),
                    at,
                    format!(
                        "output `{}` reads `{}`, which sits {inside}: a reply holds one row per request; gather the parts first",
                        o.name, o.column
                    ),
                );
            }
        }
    }

    /// Where node `id` is written.
    fn node_location(&self, id: &str) -> Location {
        self.spec
            .nodes
            .iter()
            .find(|n| n.id().value == id)
            .map(|n| n.location)
            .unwrap_or_default()
    }
}

/// "inside the fan-out of `a`" (innermost named), or "outside any fan-out".
fn describe_level(nodes: &[TypedNode<'_>], level: &[usize]) -> String {
    match level.last() {
        Some(&i) => format!(
            "inside the fan-out of `{}`",
            nodes.get(i).map_or("?", |n| n.id.as_str())
        ),
        None => "outside any fan-out".to_string(),
    }
}
