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

/// A thermal zone at or over its limit.
#[derive(Clone, Debug, PartialEq)]
pub struct Hot {
    pub zone: String,
    pub celsius: f64,
    pub limit: f64,
}

/// Without a passive or hot trip point, a zone this warm counts as hot.
const HOT_WITHOUT_TRIP_CELSIUS: f64 = 90.0;

/// The first thermal zone under `root` (normally `/sys/class/thermal`) at or
/// over its lowest passive or hot trip point (or 90 °C when it has none).
pub fn too_hot(root: &Path) -> Option<Hot> {
    let entries = std::fs::read_dir(root).ok()?;
    let millis = |path: std::path::PathBuf| std::fs::read_to_string(path).ok().and_then(|t| t.trim().parse::<f64>().ok()).map(|m| m / 1000.0);
    let mut zones: Vec<_> = entries.flatten().filter(|e| e.file_name().to_string_lossy().starts_with("thermal_zone")).collect();
    zones.sort_by_key(|e| e.file_name());
    for zone in zones {
        let dir = zone.path();
        let Some(celsius) = millis(dir.join("temp")) else { continue };
        let mut limit: Option<f64> = None;
        for n in 0..16 {
            let kind = std::fs::read_to_string(dir.join(format!("trip_point_{n}_type"))).unwrap_or_default();
            if matches!(kind.trim(), "passive" | "hot")
                && let Some(trip) = millis(dir.join(format!("trip_point_{n}_temp"))).filter(|t| *t > 0.0)
            {
                limit = Some(limit.map_or(trip, |l: f64| l.min(trip)));
            }
        }
        let limit = limit.unwrap_or(HOT_WITHOUT_TRIP_CELSIUS);
        if celsius >= limit {
            let name = std::fs::read_to_string(dir.join("type")).map(|t| t.trim().to_owned()).unwrap_or_else(|_| zone.file_name().to_string_lossy().into_owned());
            return Some(Hot { zone: name, celsius, limit });
        }
    }
    None
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
    fn a_zone_over_its_passive_trip_point_is_hot_and_one_without_trips_counts_from_90() {
        let dir = tempfile::tempdir().unwrap();
        let zone = |n: usize, kind: &str, temp: u32, trips: &[(&str, u32)]| {
            let z = dir.path().join(format!("thermal_zone{n}"));
            std::fs::create_dir_all(&z).unwrap();
            std::fs::write(z.join("type"), kind).unwrap();
            std::fs::write(z.join("temp"), temp.to_string()).unwrap();
            for (i, (t, at)) in trips.iter().enumerate() {
                std::fs::write(z.join(format!("trip_point_{i}_type")), t).unwrap();
                std::fs::write(z.join(format!("trip_point_{i}_temp")), at.to_string()).unwrap();
            }
        };
        zone(0, "acpitz", 60_000, &[("critical", 105_000), ("passive", 95_000)]);
        zone(1, "x86_pkg_temp", 88_000, &[]);
        assert_eq!(too_hot(dir.path()), None, "60 under a 95 trip, 88 under the default 90");
        zone(1, "x86_pkg_temp", 91_500, &[]);
        assert_eq!(too_hot(dir.path()), Some(Hot { zone: "x86_pkg_temp".into(), celsius: 91.5, limit: 90.0 }));
        zone(0, "acpitz", 96_000, &[("critical", 105_000), ("passive", 95_000)]);
        assert_eq!(too_hot(dir.path()).unwrap().zone, "acpitz");
        assert_eq!(too_hot(&dir.path().join("missing")), None);
    }

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
