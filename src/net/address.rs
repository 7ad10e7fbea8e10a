//! Whether an address is private: anything but a public unicast address.
//!
//! A web request to a private address could reach the user's own
//! machine, their LAN, a cloud metadata service (169.254.169.254) or a
//! carrier-grade NAT, none of which a model should browse unless the
//! person listed the host. IPv4-mapped and IPv4-compatible IPv6 addresses
//! are refused outright: a public name has no reason to resolve to one,
//! and they are a classic way round a v4-only check.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// True for every address that is not public unicast.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_private_v4(v4),
        IpAddr::V6(v6) => is_private_v6(v6),
    }
}

fn is_private_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    ip.is_unspecified()
        || a == 0 // "this network", 0.0.0.0/8
        || ip.is_loopback()
        || ip.is_private() // 10/8, 172.16/12, 192.168/16
        || ip.is_link_local() // 169.254/16, the metadata service
        || (a == 100 && (64..128).contains(&b)) // CGNAT 100.64/10
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && (18..20).contains(&b)) // benchmarking 198.18/15
        || ip.is_documentation()
        || ip.is_multicast()
        || ip.is_broadcast()
        || a >= 240 // reserved 240/4
}

fn is_private_v6(ip: Ipv6Addr) -> bool {
    let segments = ip.segments();
    let embeds_v4 = segments[..5] == [0; 5] && (segments[5] == 0xffff || segments[5] == 0);
    ip.is_unspecified()
        || ip.is_loopback()
        || embeds_v4 // ::ffff:0:0/96 and ::/96
        || (segments[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
        || (segments[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
        || (segments[0] & 0xffc0) == 0xfec0 // site-local fec0::/10
        || (segments[0] & 0xff00) == 0xff00 // multicast
        || (segments[0] == 0x2001 && segments[1] == 0x0db8) // documentation
        || (segments[0] == 0x0064 && segments[1] == 0xff9b) // NAT64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn private(text: &str) -> bool {
        is_private(text.parse().unwrap())
    }

    #[test]
    fn loopback_lan_link_local_metadata_and_cgnat_are_private() {
        for address in [
            "127.0.0.1",
            "127.8.9.10",
            "0.0.0.0",
            "0.1.2.3",
            "10.0.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.255",
            "224.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "::ffff:127.0.0.1",
            "::ffff:8.8.8.8",
            "::127.0.0.1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "ff02::1",
            "64:ff9b::7f00:1",
        ] {
            assert!(private(address), "{address} must be private");
        }
    }

    #[test]
    fn public_unicast_addresses_are_not_private() {
        for address in [
            "8.8.8.8",
            "1.1.1.1",
            "93.184.216.34",
            "172.32.0.1",
            "100.128.0.1",
            "169.255.0.1",
            "2606:4700::1111",
            "2a00:1450::1",
        ] {
            assert!(!private(address), "{address} must be public");
        }
    }
}
