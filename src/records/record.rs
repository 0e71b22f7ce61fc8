//! Records: one JSON file per published measurement (`data/records/<id>.json`), provenance-strict. This module is
//! the records' façade, one name per concept, each in its own file:
//! * `schema`: the record types ([`Record`], documented field by field in docs/records.md) and [`Problem`];
//! * `validate`: structural ([`parse`]) and semantic ([`validate`]) checks, pure;
//! * `store`: the records folder ([`check_dir`]: every problem with file and field; [`write_new`], atomic);
//! * `build`: records from a gate run's evidence ([`from_run`], [`from_pair_run_as`]); load runs in `load_records`;
//! * `rederive` and `kind`: re-deriving a record from its evidence, by the kind of run it came from;
//! * `verify`: the one loader of what may be published ([`verify_dir`], [`load_dir`]).
//!
//! It renders nothing (that is `leaderboard`), prints nothing (the `servegate records` commands are the
//! binary's) and starts nothing (that is `runner`).

pub use super::build::{from_pair_run_as, from_run, from_run_forced, RunRecordSpec};
pub use super::kind::Kind;
pub use super::schema::*;
pub use super::store::{
    check_dir, problem_lines, record_files, terminal_safe, to_json, write_new, Checked, RecordError,
};
pub use super::validate::{id_problem, is_id, parse, validate};
pub use super::verify::{load_dir, verify_dir};
pub(crate) use super::verify::{load_file, Refused};
