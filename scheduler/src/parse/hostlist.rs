//! Slurm host lists: `node[01-04,07],gpu5` expanded and compressed.

use super::limits::{MAX_HOSTS, MAX_HOST_NAME_BYTES};

/// Expands a host list such as `node[01-04,07],gpu5` (zero padding kept). At most
/// [`MAX_HOSTS`] names of at most [`MAX_HOST_NAME_BYTES`] each: both are checked
/// before a range is expanded.
pub fn expand_hostlist(s: &str) -> Result<Vec<String>, String> {
    let bad = || format!("expected a host list like node[01-04,07],gpu5, got \"{s}\"");
    let too_many = || format!("a host list may name at most {MAX_HOSTS} hosts");
    let too_long = |name_len: usize| {
        format!("a host name may be at most {MAX_HOST_NAME_BYTES} bytes long, one is {name_len}")
    };
    let mut out = Vec::new();
    let mut rest = s;
    while !rest.is_empty() {
        // Split off one item at the next comma outside brackets.
        let mut depth = 0i32;
        let mut end = rest.len();
        for (i, c) in rest.char_indices() {
            match c {
                '[' => depth += 1,
                ']' => depth -= 1,
                ',' if depth == 0 => {
                    end = i;
                    break;
                }
                _ => {}
            }
            if !(0..=1).contains(&depth) {
                return Err(bad());
            }
        }
        let item = &rest[..end];
        rest = rest.get(end + 1..).unwrap_or("");
        if item.is_empty() {
            return Err(bad());
        }
        match item.find('[') {
            None => {
                if item.contains(']') {
                    return Err(bad());
                }
                if item.len() > MAX_HOST_NAME_BYTES {
                    return Err(too_long(item.len()));
                }
                if out.len() >= MAX_HOSTS {
                    return Err(too_many());
                }
                out.push(item.to_string());
            }
            Some(open) => {
                let close = item.find(']').ok_or_else(bad)?;
                let (prefix, inner, suffix) =
                    (&item[..open], &item[open + 1..close], &item[close + 1..]);
                if inner.is_empty() || suffix.contains(['[', ']']) {
                    return Err(bad());
                }
                for r in inner.split(',') {
                    let (a, b) = r.split_once('-').unwrap_or((r, r));
                    let digits = |x: &str| {
                        !x.is_empty() && x.len() < 10 && x.bytes().all(|c| c.is_ascii_digit())
                    };
                    if !digits(a) || !digits(b) {
                        return Err(bad());
                    }
                    let (lo, hi): (u64, u64) =
                        (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                    if hi < lo {
                        return Err(bad());
                    }
                    if out.len() as u64 + (hi - lo) >= MAX_HOSTS as u64 {
                        return Err(too_many());
                    }
                    let name_len = prefix.len() + a.len().max(b.len()) + suffix.len();
                    if name_len > MAX_HOST_NAME_BYTES {
                        return Err(too_long(name_len));
                    }
                    for n in lo..=hi {
                        out.push(format!("{prefix}{n:0width$}{suffix}", width = a.len()));
                    }
                }
            }
        }
    }
    if out.is_empty() {
        return Err(bad());
    }
    Ok(out)
}

/// How many hosts a node list (`node[1-2],gpu7`) names: none for an empty list, one
/// for a list that cannot be read (it names a node at least).
pub fn hostlist_count(s: &str) -> u32 {
    if s.trim().is_empty() {
        return 0;
    }
    expand_hostlist(s).map_or(1, |names| u32::try_from(names.len()).unwrap_or(u32::MAX))
}

/// Compresses names into a host list (`node[01-03,07]`), keeping the given order
/// of prefixes; names without a numeric suffix are listed as they are.
pub fn compress_hostlist(names: &[&str]) -> String {
    let mut groups: Vec<(String, usize, Vec<u64>)> = Vec::new();
    let mut plain: Vec<String> = Vec::new();
    for name in names {
        let digits = name.bytes().rev().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 18 {
            plain.push((*name).to_string());
            continue;
        }
        let (prefix, num) = name.split_at(name.len() - digits);
        let Ok(n) = num.parse::<u64>() else {
            plain.push((*name).to_string());
            continue;
        };
        match groups.iter_mut().find(|g| g.0 == prefix && g.1 == digits) {
            Some(g) => g.2.push(n),
            None => groups.push((prefix.to_string(), digits, vec![n])),
        }
    }
    let mut parts = plain;
    for (prefix, width, mut nums) in groups {
        nums.sort_unstable();
        nums.dedup();
        if nums.len() == 1 {
            parts.push(format!("{prefix}{:0width$}", nums[0]));
            continue;
        }
        let mut ranges: Vec<String> = Vec::new();
        let mut i = 0;
        while i < nums.len() {
            let mut j = i;
            while j + 1 < nums.len() && nums[j + 1] == nums[j] + 1 {
                j += 1;
            }
            if i == j {
                ranges.push(format!("{:0width$}", nums[i]));
            } else {
                ranges.push(format!("{:0width$}-{:0width$}", nums[i], nums[j]));
            }
            i = j + 1;
        }
        parts.push(format!("{prefix}[{}]", ranges.join(",")));
    }
    parts.join(",")
}
