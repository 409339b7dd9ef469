//! Kubernetes' IP and CIDR libraries: `ip`, `isIP`, `ip.isCanonical`, `family`, the address
//! class tests, `cidr`, `isCIDR`, `containsIP`, `containsCIDR`, `ip()`, `masked`,
//! `prefixLength`. Addresses follow Go's `netip` rules without zones or IPv4-mapped IPv6.
//!
//! Owns: address parsing and tests. Must not touch: cost, evaluation.

use std::fmt;
use std::net::IpAddr;

use super::super::ir::Func;
use super::super::value::{EvalError, EvalResult, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

pub fn parse_ip(s: &str) -> Result<IpAddr, String> {
    if s.contains('%') {
        return Err(format!("IP address with zone value is not allowed: {s}"));
    }
    let ip: IpAddr = s.parse().map_err(|_| format!("IP Address {s:?} parse error during conversion from string"))?;
    if let IpAddr::V6(v6) = ip {
        if v6.to_ipv4_mapped().is_some() {
            return Err(format!("IPv4-mapped IPv6 address {s:?} is not allowed"));
        }
    }
    Ok(ip)
}

pub fn parse_cidr(s: &str) -> Result<Cidr, String> {
    let (addr, prefix) = s.split_once('/').ok_or_else(|| {
        format!("network address parse error during conversion from string: netip.ParsePrefix({s:?}): no '/'")
    })?;
    let addr = parse_ip(addr).map_err(|e| format!("network address parse error during conversion from string: {e}"))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let prefix: u8 = prefix.parse().ok().filter(|p| *p <= max && !prefix.starts_with('+')).ok_or_else(|| {
        format!(
            "network address parse error during conversion from string: netip.ParsePrefix({s:?}): bad bits after slash"
        )
    })?;
    Ok(Cidr { addr, prefix })
}

fn bits(ip: IpAddr) -> (u128, u8) {
    match ip {
        IpAddr::V4(v4) => (u128::from(u32::from(v4)), 32),
        IpAddr::V6(v6) => (u128::from(v6), 128),
    }
}

fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    let (value, width) = bits(ip);
    let keep = if prefix == 0 { 0 } else { (!0u128) << (u32::from(width - prefix.min(width))) };
    let masked = value & keep & if width == 32 { 0xffff_ffff } else { !0 };
    match ip {
        IpAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::from(masked as u32)),
        IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::from(masked)),
    }
}

impl Cidr {
    fn contains_ip(&self, ip: IpAddr) -> bool {
        ip.is_ipv4() == self.addr.is_ipv4() && mask(ip, self.prefix) == mask(self.addr, self.prefix)
    }

    fn contains_cidr(&self, o: &Cidr) -> bool {
        o.prefix >= self.prefix && self.contains_ip(o.addr)
    }
}

fn link_local_multicast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.octets().get(..3) == Some(&[224, 0, 0]),
        IpAddr::V6(v6) => v6.segments().first().is_some_and(|s| s & 0xff0f == 0xff02),
    }
}

fn link_local_unicast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => v6.segments().first().is_some_and(|s| s & 0xffc0 == 0xfe80),
    }
}

fn global_unicast(ip: IpAddr) -> bool {
    let broadcast = matches!(ip, IpAddr::V4(v4) if v4.is_broadcast());
    !(ip.is_unspecified() || ip.is_loopback() || ip.is_multicast() || link_local_unicast(ip) || broadcast)
}

fn ip_arg(v: Option<&Value<'_>>) -> Result<IpAddr, EvalError> {
    match v {
        Some(Value::Ip(ip)) => Ok(*ip),
        Some(Value::Str(s)) => parse_ip(s.as_str()).map_err(EvalError::new),
        _ => Err(EvalError::no_overload()),
    }
}

fn cidr_arg(v: Option<&Value<'_>>) -> Result<Cidr, EvalError> {
    match v {
        Some(Value::Cidr(c)) => Ok(*c),
        Some(Value::Str(s)) => parse_cidr(s.as_str()).map_err(EvalError::new),
        _ => Err(EvalError::no_overload()),
    }
}

fn text<'v>(v: Option<&'v Value<'_>>) -> Result<&'v str, EvalError> {
    match v {
        Some(Value::Str(s)) => Ok(s.as_str()),
        _ => Err(EvalError::no_overload()),
    }
}

pub fn call<'a>(func: Func, args: &[Value<'a>]) -> EvalResult<'a> {
    let a0 = args.first();
    let a1 = args.get(1);
    Ok(match func {
        Func::Ip => Value::Ip(parse_ip(text(a0)?).map_err(EvalError::new)?),
        Func::IsIp => Value::Bool(parse_ip(text(a0)?).is_ok()),
        Func::IpIsCanonical => {
            let s = text(a0)?;
            Value::Bool(parse_ip(s).map_err(EvalError::new)?.to_string() == s)
        }
        Func::Family => Value::Int(if ip_arg(a0)?.is_ipv4() { 4 } else { 6 }),
        Func::IsUnspecified => Value::Bool(ip_arg(a0)?.is_unspecified()),
        Func::IsLoopback => Value::Bool(ip_arg(a0)?.is_loopback()),
        Func::IsLinkLocalMulticast => Value::Bool(link_local_multicast(ip_arg(a0)?)),
        Func::IsLinkLocalUnicast => Value::Bool(link_local_unicast(ip_arg(a0)?)),
        Func::IsGlobalUnicast => Value::Bool(global_unicast(ip_arg(a0)?)),
        Func::Cidr => Value::Cidr(parse_cidr(text(a0)?).map_err(EvalError::new)?),
        Func::IsCidr => Value::Bool(parse_cidr(text(a0)?).is_ok()),
        Func::ContainsIp => Value::Bool(cidr_arg(a0)?.contains_ip(ip_arg(a1)?)),
        Func::ContainsCidr => Value::Bool(cidr_arg(a0)?.contains_cidr(&cidr_arg(a1)?)),
        Func::CidrIp => Value::Ip(cidr_arg(a0)?.addr),
        Func::Masked => {
            let c = cidr_arg(a0)?;
            Value::Cidr(Cidr { addr: mask(c.addr, c.prefix), prefix: c.prefix })
        }
        Func::PrefixLength => Value::Int(i64::from(cidr_arg(a0)?.prefix)),
        _ => return Err(EvalError::no_overload()),
    })
}
