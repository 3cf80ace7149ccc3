//! Raw bytes as a ROOT file of TTrees: the tree streamer, branches, leaves, baskets and their
//! values (`histfit_testutil::inputs::root_tree_bytes`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| histfit_testutil::inputs::root_tree_bytes(data));
