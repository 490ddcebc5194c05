//! Loom model tests; compiled only with `--cfg handle_pool_loom` (see ci/loom.sh).
