//! Where results go: the results model (report) and its output formats (JUnit).

pub mod junit;
pub mod report;
