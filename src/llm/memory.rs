//! What the machine says about memory and power, for the model manager:
//! `/proc/meminfo` (MemAvailable, MemTotal), `/proc/pressure/memory` (PSI:
//! the share of time tasks stalled on memory) and `/sys/class/power_supply`
//! (a battery discharging). Parsing is pure; reading is one small file each.

use std::path::Path;

/// (MemAvailable, MemTotal) in bytes.
pub fn parse_meminfo(text: &str) -> Option<(u64, u64)> {
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map(|kb| kb * 1024)
    };
    Some((field("MemAvailable:")?, field("MemTotal:")?))
}

pub fn meminfo() -> Option<(u64, u64)> {
    parse_meminfo(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

/// PSI `some avg10`: the percentage of the last 10 s in which some task waited for memory.
pub fn parse_pressure(text: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.starts_with("some "))?;
    line.split_whitespace().find_map(|f| f.strip_prefix("avg10=")).and_then(|v| v.parse().ok())
}

pub fn memory_pressure() -> Option<f64> {
    parse_pressure(&std::fs::read_to_string("/proc/pressure/memory").ok()?)
}

/// Whether any battery under `root` (normally `/sys/class/power_supply`) is discharging.
pub fn on_battery(root: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(root) else { return false };
    entries.flatten().any(|entry| {
        let read = |name: &str| std::fs::read_to_string(entry.path().join(name)).unwrap_or_default();
        read("type").trim() == "Battery" && read("status").trim() == "Discharging"
    })
}

/// Above this PSI `some avg10` the local model is unloaded early.
pub const PRESSURE_UNLOAD_PERCENT: f64 = 20.0;

/// Why the local model should be unloaded now, if it should.
pub fn unload_reason(idle_secs: u64, idle_limit_secs: u64, battery_idle_secs: u64, on_battery: bool, pressure: Option<f64>, available: Option<u64>, reserve: u64) -> Option<String> {
    if idle_limit_secs > 0 && idle_secs >= idle_limit_secs {
        return Some(format!("idle for {idle_secs} s"));
    }
    if on_battery && idle_secs >= battery_idle_secs {
        return Some(format!("on battery and idle for {idle_secs} s"));
    }
    if let Some(pressure) = pressure.filter(|p| *p >= PRESSURE_UNLOAD_PERCENT) {
        return Some(format!("memory pressure ({pressure:.0} % of the last 10 s stalled on memory)"));
    }
    if let Some(available) = available.filter(|a| *a < reserve) {
        return Some(format!("only {:.0} MB of memory available", available as f64 / 1e6));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linux_files_parse_and_signals_decide_unloading() {
        let meminfo = "MemTotal:       24576000 kB\nMemFree:         1000 kB\nMemAvailable:   20480000 kB\n";
        assert_eq!(parse_meminfo(meminfo), Some((20_480_000 * 1024, 24_576_000 * 1024)));
        let psi = "some avg10=31.50 avg60=10.00 avg300=2.00 total=123\nfull avg10=5.00 avg60=1.00 avg300=0.00 total=45\n";
        assert_eq!(parse_pressure(psi), Some(31.5));
        let dir = tempfile::tempdir().unwrap();
        let bat = dir.path().join("BAT0");
        std::fs::create_dir(&bat).unwrap();
        std::fs::write(bat.join("type"), "Battery\n").unwrap();
        std::fs::write(bat.join("status"), "Charging\n").unwrap();
        assert!(!on_battery(dir.path()));
        std::fs::write(bat.join("status"), "Discharging\n").unwrap();
        assert!(on_battery(dir.path()));
        assert_eq!(unload_reason(10, 600, 60, false, Some(1.0), Some(10_000_000_000), 512_000_000), None);
        assert!(unload_reason(600, 600, 60, false, None, None, 0).unwrap().contains("idle"));
        assert!(unload_reason(61, 600, 60, true, None, None, 0).unwrap().contains("battery"));
        assert!(unload_reason(5, 600, 60, false, Some(31.5), None, 0).unwrap().contains("pressure"));
        assert!(unload_reason(5, 600, 60, false, None, Some(100_000_000), 512_000_000).unwrap().contains("100 MB"));
    }
}
