//! `histfit-import`: HistFactory XML configurations and the ROOT histograms they name → a pyhf
//! JSON workspace, with the semantics of pyhf's `xml2json` (the reference importer), and
//! histfit's own ROOT reader (no ROOT installation): one-dimensional histograms, and the flat
//! branches of TTrees that event-level likelihoods read their events from.
//!
//! - [`root`] reads ROOT files: header, directories, keys, compressed records (zlib, LZ4, zstd,
//!   xz), the TH1C/S/I/F/D streamer, and TTrees' flat numeric branches and their baskets.
//! - [`xml`] walks a top-level `<Combination>` file, its channel files and their histograms into
//!   the workspace's `channels`, `observations` and `measurements`, collecting pyhf's warnings.

pub mod root;
pub mod xml;

pub use root::{Histogram, RootFile};
pub use xml::{xml2json, Imported, Mount};

/// Why an import failed: the file (and the element or object in it) and the rule broken.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{place}: {rule}")]
pub struct ImportError {
    pub place: String,
    pub rule: String,
}

impl ImportError {
    pub fn new(place: impl Into<String>, rule: impl Into<String>) -> Self {
        ImportError {
            place: place.into(),
            rule: rule.into(),
        }
    }
}
