//! Run records: schema, validation, building from runs, the store, and the leaderboard. `record` is the
//! façade of the record concepts (schema, validate, store, build, rederive, kind, verify); `chart` draws the
//! leaderboard's charts, `leaderboard` renders the pages.

pub mod bless;
pub mod build;
pub mod chart;
pub mod curves;
pub mod kind;
pub mod leaderboard;
pub mod load_records;
pub mod publish;
pub mod record;
pub mod rederive;
pub mod schema;
pub mod store;
pub mod validate;
pub mod verify;

#[cfg(test)]
mod record_tests;
