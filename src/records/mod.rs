//! Run records: schema, validation, building from runs, the store, and the leaderboard.

pub mod bless;
pub mod leaderboard;
pub mod load_records;
pub mod publish;
pub mod record;
