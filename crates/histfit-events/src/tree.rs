//! Events read from ROOT TTrees by histfit's own ROOT reader (`histfit-import`): flat numeric
//! branches of any compression ROOT writes (zlib, LZ4, LZMA, zstd), each read whole into an f64
//! column. Which branches, and what is computed from them (observables, a selection, a weight),
//! is the HS3 reader's: `histfit-unbinned` parses those expressions and asks for the branches
//! they name.

use crate::SourceError;
use std::path::{Path, PathBuf};

/// An open tree: its branches listed, each read on request.
pub struct TreeFile {
    root: histfit_import::RootFile,
    tree: histfit_import::root::Tree,
    file: PathBuf,
}

impl TreeFile {
    /// The tree at `tree` ("name" or "dir/name") in `file`.
    pub fn open(file: &Path, tree: &str) -> Result<TreeFile, SourceError> {
        let fail = |e: histfit_import::ImportError| SourceError {
            file: file.display().to_string(),
            rule: e.rule,
        };
        let mut root = histfit_import::RootFile::open(file).map_err(fail)?;
        let tree = root.tree(tree).map_err(fail)?;
        Ok(TreeFile {
            root,
            tree,
            file: file.to_path_buf(),
        })
    }

    /// The names of the tree's branches (flat or not), in the file's order.
    pub fn branches(&self) -> Vec<&str> {
        self.tree.branches.iter().map(|b| b.name.as_str()).collect()
    }

    /// The tree's entries.
    pub fn entries(&self) -> u64 {
        self.tree.entries
    }

    /// The values of the flat branch `name`, one an entry.
    pub fn read(&mut self, name: &str) -> Result<Vec<f64>, SourceError> {
        self.root
            .branch_values(&self.tree, name)
            .map_err(|e| SourceError {
                file: self.file.display().to_string(),
                rule: e.rule,
            })
    }
}

/// The branches `names` of the tree at `tree` ("name" or "dir/name") in `file`, one f64 column
/// each.
pub fn read_branches(
    file: &Path,
    tree: &str,
    names: &[String],
) -> Result<Vec<Vec<f64>>, SourceError> {
    let mut t = TreeFile::open(file, tree)?;
    names.iter().map(|n| t.read(n)).collect()
}
