//! Diagnostics: what is wrong with a graph spec, where, and how to fix it.
//!
//! Every rule that rejects a spec produces a [`Diagnostic`] carrying a message, a *path* into the spec
//! (`nodes.classify.inputs.data_0`, which means something to builder-API users too), the YAML
//! location when the spec came from a file, and an optional help line. [`Diagnostics`] collects all
//! of them so a user fixes every problem in one pass, and renders them with a source snippet:
//!
//! ```text
//! error: node `top5` reads from `squeezenett`, which is not a node or graph input
//!   --> graphs/quickstart.yaml:17:14   (nodes.top5.input)
//!    |
//! 17 |       input: squeezenett
//!    |              ^
//!    = help: did you mean `squeezenet`?
//! ```

use std::fmt;
use std::sync::Arc;

/// A position in a YAML source: 1-based line and column, or [`Location::UNKNOWN`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Location {
    /// 1-based line; 0 when unknown.
    pub line: u64,
    /// 1-based column; 0 when unknown.
    pub column: u64,
}

impl Location {
    /// No location (a spec made with the builder API).
    pub const UNKNOWN: Location = Location { line: 0, column: 0 };

    /// Whether the location is known.
    pub fn is_known(&self) -> bool {
        self.line > 0
    }
}

impl From<serde_saphyr::Location> for Location {
    fn from(l: serde_saphyr::Location) -> Self {
        Location {
            line: l.line(),
            column: l.column(),
        }
    }
}

/// How bad a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// The graph cannot run.
    Error,
    /// The graph runs, but probably not as meant (`--deny-warnings` turns these into errors).
    Warning,
}

/// One finding about a spec.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// What is wrong, naming the node and field.
    pub message: String,
    /// Where in the spec, as a dotted path.
    pub path: String,
    /// Where in the YAML text, when known.
    pub location: Location,
    /// How to fix it, when there is something useful to say.
    pub help: Option<String>,
}

impl Diagnostic {
    /// An error at `path`/`location`.
    pub fn error(path: impl Into<String>, location: Location, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            message: message.into(),
            path: path.into(),
            location,
            help: None,
        }
    }

    /// A warning at `path`/`location`.
    pub fn warning(
        path: impl Into<String>,
        location: Location,
        message: impl Into<String>,
    ) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(path, location, message)
        }
    }

    /// Adds a help line.
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }
}

/// The text a spec was read from, for snippets.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceText {
    /// File name as the user gave it.
    pub name: String,
    /// The YAML text.
    pub text: Arc<str>,
}

/// All findings about one spec.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Diagnostics {
    /// The findings, in the order the rules found them.
    pub items: Vec<Diagnostic>,
    /// The source, when the spec came from text.
    pub source: Option<SourceText>,
}

impl Diagnostics {
    /// Whether any finding is an error.
    pub fn has_errors(&self) -> bool {
        self.items.iter().any(|d| d.severity == Severity::Error)
    }

    /// The errors only.
    pub fn errors(&self) -> impl Iterator<Item = &Diagnostic> {
        self.items.iter().filter(|d| d.severity == Severity::Error)
    }

    /// The warnings only.
    pub fn warnings(&self) -> impl Iterator<Item = &Diagnostic> {
        self.items
            .iter()
            .filter(|d| d.severity == Severity::Warning)
    }

    fn render_one(&self, d: &Diagnostic, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let level = match d.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        writeln!(f, "{level}: {}", d.message)?;
        let name = self.source.as_ref().map(|s| s.name.as_str());
        match (name, d.location.is_known()) {
            (Some(name), true) => writeln!(
                f,
                "  --> {name}:{}:{}   ({})",
                d.location.line, d.location.column, d.path
            )?,
            (Some(name), false) => writeln!(f, "  --> {name}   ({})", d.path)?,
            (None, _) => writeln!(f, "  --> {}", d.path)?,
        }
        if let (Some(src), true) = (&self.source, d.location.is_known()) {
            if let Some(line) = src.text.lines().nth(d.location.line as usize - 1) {
                let num = d.location.line.to_string();
                let pad = " ".repeat(num.len());
                writeln!(f, "{pad} |")?;
                writeln!(f, "{num} | {line}")?;
                let col = (d.location.column as usize).saturating_sub(1);
                writeln!(f, "{pad} | {}^", " ".repeat(col))?;
            }
        }
        if let Some(help) = &d.help {
            writeln!(f, "   = help: {help}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.items.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            self.render_one(d, f)?;
        }
        let errors = self.errors().count();
        if errors > 0 {
            write!(
                f,
                "\n{errors} error{} found",
                if errors == 1 { "" } else { "s" }
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}

/// The closest of `candidates` to `name` by edit distance, if it is close enough to be a likely typo.
pub fn did_you_mean<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let limit = (name.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .map(|c| (edit_distance(name, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        assert_eq!(did_you_mean("resnt", ["resnet", "top5"]), Some("resnet"));
        assert_eq!(did_you_mean("zzz", ["resnet", "top5"]), None);
    }

    #[test]
    fn renders_snippet_with_caret() {
        let diags = Diagnostics {
            items: vec![Diagnostic::error(
                "nodes.a.input",
                Location {
                    line: 2,
                    column: 10,
                },
                "bad",
            )
            .with_help("fix it")],
            source: Some(SourceText {
                name: "g.yaml".into(),
                text: "name: g\ninput:   xx\n".into(),
            }),
        };
        let s = diags.to_string();
        assert!(s.contains("--> g.yaml:2:10   (nodes.a.input)"), "{s}");
        assert!(s.contains("2 | input:   xx"), "{s}");
        assert!(s.contains("  |          ^"), "{s}");
        assert!(s.contains("= help: fix it"), "{s}");
    }
}
