//! The generated directory users of the LDAP fixture: [`COUNT`] accounts beside the named ones
//! of `tests/fixtures/ldap/directory.ldif`, for tests and benchmarks of many users at once.
//!
//! Deterministic: user `n` (1 ..= [`COUNT`]) is always the same entry.
//!
//! | what          | value for user `n` (here n = 7)                                      |
//! |---------------|----------------------------------------------------------------------|
//! | login (`uid`) | `user0007`                                                           |
//! | DN            | `uid=user0007,ou=people,dc=example,dc=org`                           |
//! | password      | `user0007-secret` (stored `{SSHA}`, a salt derived from `n`)         |
//! | `uidNumber`   | 30000 + n (= `gidNumber`), home `/home/user0007`, shell `/bin/bash`  |
//! | groups        | `gpu-users` (groupOfNames: `memberOf` is set) and `team-NN`          |
//!
//! The teams are [`TEAMS`] `posixGroup`s, `team-01` … `team-20` (gidNumber 21000 + t), with
//! their members by `memberUid`: user `n` is in team `(n - 1) % TEAMS + 1`, 100 users each.
//! Sites mix both kinds; a login that reads groups from `memberOf` sees `gpu-users` only, one
//! that searches the groups sees the team too.
//!
//! Owns the entries only: [`super::ldap::Slapd::start`] loads them (the people and the teams
//! with `slapadd`, the `gpu-users` members with the group itself over LDAP).

use base64::Engine as _;
use sha1::{Digest as _, Sha1};

/// How many generated users the fixture directory holds.
pub const COUNT: u32 = 2000;
/// How many `team-NN` posixGroups the generated users are spread over.
pub const TEAMS: u32 = 20;
/// `uidNumber` of user `n` is this plus `n`.
pub const UID_BASE: u32 = 30000;
/// `gidNumber` of `team-NN` is this plus `NN`.
pub const TEAM_GID_BASE: u32 = 21000;

/// Generated user `n` (1 ..= [`COUNT`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedUser {
    pub n: u32,
    /// Login name, `user0007`.
    pub uid: String,
    /// `uid=user0007,ou=people,dc=example,dc=org`.
    pub dn: String,
    /// `user0007-secret`.
    pub password: String,
    pub uid_number: u32,
    /// `team-07`.
    pub team: String,
}

/// User `n` of the generated ones (1 ..= [`COUNT`]; any `n` gives an entry's values, but only
/// those up to [`COUNT`] are in the directory).
pub fn user(n: u32) -> GeneratedUser {
    let uid = format!("user{n:04}");
    GeneratedUser {
        n,
        dn: format!("uid={uid},{}", super::ldap::PEOPLE_DN),
        password: format!("{uid}-secret"),
        uid_number: UID_BASE + n,
        team: team_name((n - 1) % TEAMS + 1),
        uid,
    }
}

/// Every generated user, in order.
pub fn users() -> impl Iterator<Item = GeneratedUser> {
    (1..=COUNT).map(user)
}

/// `team-07`.
pub fn team_name(t: u32) -> String {
    format!("team-{t:02}")
}

/// `{SSHA}` of `password` with a 4-byte `salt`, as `slappasswd -h {SSHA}` writes it.
pub fn ssha(password: &str, salt: [u8; 4]) -> String {
    let mut hasher = Sha1::new();
    hasher.update(password.as_bytes());
    hasher.update(salt);
    let mut raw = hasher.finalize().to_vec();
    raw.extend_from_slice(&salt);
    format!(
        "{{SSHA}}{}",
        base64::engine::general_purpose::STANDARD.encode(raw)
    )
}

/// The entries `slapadd` loads: the people, then the teams.
pub fn offline_ldif() -> String {
    let mut ldif = String::with_capacity(COUNT as usize * 400);
    for u in users() {
        let salt = u.n.to_be_bytes();
        ldif.push_str(&format!(
            "dn: {dn}\nobjectClass: inetOrgPerson\nobjectClass: posixAccount\nuid: {uid}\n\
             cn: User {n:04}\nsn: {n:04}\ngivenName: User\ndisplayName: User {n:04}\n\
             mail: {uid}@example.org\nuidNumber: {number}\ngidNumber: {number}\n\
             homeDirectory: /home/{uid}\nloginShell: /bin/bash\nuserPassword: {hash}\n\n",
            dn = u.dn,
            uid = u.uid,
            n = u.n,
            number = u.uid_number,
            hash = ssha(&u.password, salt),
        ));
    }
    for t in 1..=TEAMS {
        let name = team_name(t);
        ldif.push_str(&format!(
            "dn: cn={name},{groups}\nobjectClass: posixGroup\ncn: {name}\ngidNumber: {gid}\n\
             description: posixGroup of generated users, members by memberUid\n",
            groups = super::ldap::GROUPS_DN,
            gid = TEAM_GID_BASE + t,
        ));
        for u in users().filter(|u| u.team == name) {
            ldif.push_str(&format!("memberUid: {}\n", u.uid));
        }
        ldif.push('\n');
    }
    ldif
}

/// The `member:` lines that put every generated user in `gpu-users`.
pub fn gpu_users_members() -> String {
    users().map(|u| format!("member: {}\n", u.dn)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_are_deterministic_and_spread_over_the_teams() {
        let seven = user(7);
        assert_eq!(seven.uid, "user0007");
        assert_eq!(seven.dn, "uid=user0007,ou=people,dc=example,dc=org");
        assert_eq!(seven.password, "user0007-secret");
        assert_eq!(seven.uid_number, 30007);
        assert_eq!(seven.team, "team-07");
        assert_eq!(user(21).team, "team-01");
        assert_eq!(users().count(), COUNT as usize);
        let ldif = offline_ldif();
        assert_eq!(ldif, offline_ldif(), "the same every time");
        assert_eq!(ldif.matches("objectClass: posixAccount").count(), 2000);
        assert_eq!(ldif.matches("memberUid: ").count(), 2000);
        assert_eq!(gpu_users_members().lines().count(), 2000);
    }

    #[test]
    fn ssha_matches_slappasswd() {
        // slappasswd -h {SSHA} -s alice-secret, salt taken from the fixture's hash.
        let stored = "{SSHA}7w6u6whdF2kvUovf2dY0sXclZYL2LMQ9";
        let raw = base64::engine::general_purpose::STANDARD
            .decode(&stored[6..])
            .expect("base64");
        let salt: [u8; 4] = raw[20..].try_into().expect("4-byte salt");
        assert_eq!(ssha("alice-secret", salt), stored);
    }
}
