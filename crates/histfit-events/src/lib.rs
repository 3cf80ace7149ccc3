//! `histfit-events`: where an event-level likelihood's events come from, read into columns of
//! f64 (structure of arrays) with optional weights — [`parquet`] files and ROOT TTrees ([`tree`]);
//! arrays handed over from Python next. No statistics here: the HS3 reader in `histfit-unbinned`
//! says what to read (columns, domains, what to do with events outside them) and builds the
//! likelihood over what comes back.

pub mod parquet;
pub mod tree;

pub use self::parquet::{
    count_outside, read_parquet, read_parquet_bytes, ColumnRequest, Loaded, SourceError, SourceSpec,
};
pub use self::tree::{read_branches, TreeFile};
