//! The programs' own diagnostics: aya-log's reader of their log ring, and
//! the logger that forwards their records to the agent's at the level
//! [`PROBE_RECORDS_AT_INFO`] gives them.

use std::sync::atomic::Ordering;

/// aya-log's reader of the programs' log ring.
pub(super) type Logger = aya_log::EbpfLogger<&'static dyn log::Log>;

/// How many of the programs' records an agent shows at info level (`-v`);
/// the rest go to debug (`-vv`). A probe that fails for every thread of a
/// big program writes thousands of records: `-v` shows the first few and
/// the per-kind count (always shown), `-vv` every one.
pub const PROBE_RECORDS_AT_INFO: u64 = 10;

/// Forwards the programs' aya-log records to the agent's logger at the
/// level [`PROBE_RECORDS_AT_INFO`] gives them; errors and warnings keep
/// theirs.
pub(super) struct ProbeLog {
    seen: std::sync::atomic::AtomicU64,
}

pub(super) static PROBE_LOG: ProbeLog = ProbeLog { seen: std::sync::atomic::AtomicU64::new(0) };

impl log::Log for ProbeLog {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }

    fn log(&self, record: &log::Record<'_>) {
        let n = self.seen.fetch_add(1, Ordering::Relaxed) + 1;
        let floor = if n <= PROBE_RECORDS_AT_INFO { log::Level::Info } else { log::Level::Debug };
        let level = record.level().min(floor);
        let more = if n == PROBE_RECORDS_AT_INFO { " (further records at -vv)" } else { "" };
        log::logger().log(
            &log::Record::builder()
                .args(format_args!("{}{more}", record.args()))
                .level(level)
                .target(record.target())
                .module_path(record.module_path())
                .file(record.file())
                .line(record.line())
                .build(),
        );
    }

    fn flush(&self) {
        log::logger().flush();
    }
}
