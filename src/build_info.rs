//! Build metadata embedded by build.rs (git revision and build date).

pub const VERSION: &str = env!("CARGO_PKG_VERSION");
pub const GIT_REV: &str = env!("COWORK_GIT_REV");
pub const BUILD_DATE: &str = env!("COWORK_BUILD_DATE");

/// One line for `cowork --version` and Settings → About.
pub const LONG_VERSION: &str =
    concat!(env!("CARGO_PKG_VERSION"), " (", env!("COWORK_GIT_REV"), ", built ", env!("COWORK_BUILD_DATE"), ")");

pub fn long_version() -> &'static str {
    LONG_VERSION
}
