//! Serving HTTPS directly: a certificate the test makes, Secure cookies.

use crate::fixtures::{hidden_field, openssl, set_cookie, spawn_with, Options};

#[tokio::test]
async fn https_with_a_test_ca_sets_secure_cookies() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = |name: &str| dir.path().join(name).to_str().expect("utf8").to_string();
    let (cert, key, ca, ca_key, csr, ext) = (
        path("cert.pem"),
        path("key.pem"),
        path("ca.pem"),
        path("ca.key"),
        path("leaf.csr"),
        path("leaf.ext"),
    );
    std::fs::write(
        &ext,
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .expect("ext");
    let ec = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
    // A throwaway CA, a key and request for 127.0.0.1, signed by the CA.
    openssl(&format!(
        "req -x509 -days 1 -subj /CN=atrium-test-ca {ec} -keyout {ca_key} -out {ca}"
    ));
    openssl(&format!(
        "req -subj /CN=127.0.0.1 {ec} -keyout {key} -out {csr}"
    ));
    openssl(&format!(
        "x509 -req -days 1 -in {csr} -CA {ca} -CAkey {ca_key} -CAcreateserial -extfile {ext} -out {cert}"
    ));

    let app = spawn_with(Options {
        extra_config: format!("[tls]\ncert_file = \"{}\"\nkey_file = \"{}\"\n", cert, key),
        ..Options::default()
    })
    .await;
    assert!(app.base.starts_with("https://"), "{}", app.base);

    let ca = reqwest::Certificate::from_pem(&std::fs::read(&ca).expect("ca")).expect("pem");
    let client = reqwest::Client::builder()
        .add_root_certificate(ca)
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let page = client
        .get(app.url("/login"))
        .send()
        .await
        .expect("login page");
    let login_csrf = set_cookie(page.headers(), "atrium_login_csrf").expect("csrf cookie");
    assert!(login_csrf.contains("Secure"), "{login_csrf}");
    let csrf = hidden_field(&page.text().await.expect("html"), "csrf").expect("csrf");
    let password = app.admin_password.clone().expect("pw");
    let res = client
        .post(app.url("/login"))
        .form(&[
            ("username", "admin"),
            ("password", password.as_str()),
            ("csrf", csrf.as_str()),
        ])
        .send()
        .await
        .expect("login");
    assert_eq!(res.status(), 303);
    let cookie = set_cookie(res.headers(), "atrium_session").expect("session cookie");
    assert!(
        cookie.contains("Secure") && cookie.contains("HttpOnly"),
        "{cookie}"
    );
    let me = client.get(app.url("/api/v1/me")).send().await.expect("me");
    assert_eq!(me.status(), 200);

    // Plain HTTP to the TLS port gets no answer, and an untrusted client refuses the cert.
    let plain = reqwest::get(app.url("/healthz").replacen("https", "http", 1)).await;
    assert!(plain.map(|r| !r.status().is_success()).unwrap_or(true));
    assert!(reqwest::get(app.url("/healthz")).await.is_err());
}
