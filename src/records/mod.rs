//! Run records: schema, validation, building from runs, the store, and the leaderboard. `record` is the
//! façade of the record concepts (schema, validate, store, build, rederive, kind, verify); `chart` draws the
//! leaderboard's charts, `leaderboard` renders the pages.

pub mod bless;
mod build;
mod chart;
mod curves;
mod footprint;
mod kind;
pub mod leaderboard;
pub mod load_records;
pub mod publish;
pub mod record;
mod rederive;
mod schema;
mod store;
mod validate;
mod verify;

#[cfg(test)]
mod footprint_tests;
#[cfg(test)]
mod record_tests;
