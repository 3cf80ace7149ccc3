//! Events read from ROOT TTrees by histfit's own ROOT reader (`histfit-import`): flat numeric
//! branches of any compression ROOT writes (zlib, LZ4, LZMA, zstd), each read whole into an f64
//! column. Which branches, and what is computed from them (observables, a selection, a weight),
//! is the HS3 reader's: `histfit-unbinned` parses those expressions and asks for the branches
//! they name.

use crate::SourceError;
use std::path::Path;

/// The branches `names` of the tree at `tree` ("name" or "dir/name") in `file`, one f64 column
/// each, and the tree's entry count.
pub fn read_branches(
    file: &Path,
    tree: &str,
    names: &[String],
) -> Result<Vec<Vec<f64>>, SourceError> {
    let fail = |e: histfit_import::ImportError| SourceError {
        file: file.display().to_string(),
        rule: e.rule,
    };
    let mut root = histfit_import::RootFile::open(file).map_err(fail)?;
    let t = root.tree(tree).map_err(fail)?;
    names
        .iter()
        .map(|n| root.branch_values(&t, n).map_err(fail))
        .collect()
}
