//! Each command's flags, as clap parses them, and what they become: the
//! `*Args` of `perfops_run`, where the command runs. A flag's help is its
//! doc comment here; the field it fills is documented there.

pub(crate) mod ctl;
pub(crate) mod demo;
pub(crate) mod fleet_agent;
pub(crate) mod fleet_coordinator;
pub(crate) mod import;
pub(crate) mod k8s;
pub(crate) mod k8s_tar;
pub(crate) mod limit;
pub(crate) mod merge;
pub(crate) mod outputs;
pub(crate) mod quick;
pub(crate) mod run;
pub(crate) mod session;
pub(crate) mod shard;
pub(crate) mod sweep;
