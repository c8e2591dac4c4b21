//! Proves the Jupyter helpers (tests/src/support/jupyter.rs) against a real Jupyter Server
//! started directly, without the portal: the test adds Jupyter's token as the portal's proxy
//! will. Skipped outside CI when the Jupyter environment is missing (tests/install-deps.sh).

use std::time::Duration;

use atrium_tests::support::jupyter::{self, JupyterServer, WsProtocol};
use atrium_tests::support::wait;

/// Bounds each exchange with a kernel (its start included on the first).
const DEADLINE: Duration = Duration::from_secs(60);
/// The path the portal gives a session's server.
const BASE_PATH: &str = "/user/alice/default/";

#[tokio::test]
async fn kernels_run_code_over_both_websocket_protocols() -> anyhow::Result<()> {
    let Some(venv) = jupyter::venv_or_skip("kernels_run_code_over_both_websocket_protocols")?
    else {
        return Ok(());
    };
    let mut server = JupyterServer::start(&venv, BASE_PATH).await?;
    let (base, headers) = (server.base().clone(), server.headers());
    assert!(base.path().ends_with(BASE_PATH), "{base}");
    let client = reqwest::Client::new();

    // No XSRF cookie or header: token-authenticated POSTs need none.
    let kernel = jupyter::start_kernel(&client, &base, &headers).await?;
    for protocol in [WsProtocol::Legacy, WsProtocol::V1] {
        let out = jupyter::execute(&base, &headers, &kernel, "print(6*7)", protocol, DEADLINE)
            .await
            .map_err(|e| e.context(format!("Jupyter's log ends:\n{}", server.log_tail(40))))?;
        assert_eq!(out, "42\n", "{protocol:?}");
    }

    // One kernel, many connections: state set over one protocol is read over the other.
    let ws = jupyter::ws_url(&base)?;
    jupyter::execute(
        &ws,
        &headers,
        &kernel,
        "x = 'kept'",
        WsProtocol::V1,
        DEADLINE,
    )
    .await?;
    let out = jupyter::execute(
        &ws,
        &headers,
        &kernel,
        "print(x)",
        WsProtocol::Legacy,
        DEADLINE,
    )
    .await?;
    assert_eq!(out, "kept\n");

    // Several stdout messages are joined; an exception is an error naming it.
    let out = jupyter::execute(
        &base,
        &headers,
        &kernel,
        "import sys\nfor i in range(3):\n    print(i); sys.stdout.flush()",
        WsProtocol::V1,
        DEADLINE,
    )
    .await?;
    assert_eq!(out, "0\n1\n2\n");
    let err = jupyter::execute(
        &base,
        &headers,
        &kernel,
        "print('before'); 1/0",
        WsProtocol::Legacy,
        DEADLINE,
    )
    .await
    .expect_err("a ZeroDivisionError must fail the execution");
    let err = format!("{err:#}");
    assert!(err.contains("ZeroDivisionError"), "{err}");
    assert!(
        err.contains("before"),
        "the output so far is reported: {err}"
    );

    // A kernel kept busy stays busy after the helper returns, as the server reports it.
    jupyter::kernel_busy_for(
        &base,
        &headers,
        &kernel,
        Duration::from_secs(120),
        WsProtocol::V1,
        DEADLINE,
    )
    .await?;
    let state = || jupyter::kernel_state(&client, &base, &headers, &kernel);
    wait::until("the server to report the kernel busy", DEADLINE, || async {
        let state = state().await?;
        anyhow::ensure!(state == "busy", "execution_state {state}");
        anyhow::Ok(())
    })
    .await?;

    server.stop()?;
    Ok(())
}

#[tokio::test]
async fn notebooks_are_saved_and_read_and_the_token_is_required() -> anyhow::Result<()> {
    let Some(venv) =
        jupyter::venv_or_skip("notebooks_are_saved_and_read_and_the_token_is_required")?
    else {
        return Ok(());
    };
    let mut server = JupyterServer::start(&venv, BASE_PATH).await?;
    let (base, headers) = (server.base().clone(), server.headers());
    let client = reqwest::Client::new();

    let notebook = jupyter::notebook(&["print('saved')", "x = 1"]);
    let path = "my analysis.ipynb";
    let model = jupyter::save_notebook(&client, &base, &headers, path, &notebook).await?;
    assert_eq!(model["type"], "notebook", "{model}");
    assert_eq!(model["path"], path, "{model}");
    assert!(server.root_dir().join(path).is_file());

    let read = jupyter::get_contents(&client, &base, &headers, path).await?;
    assert_eq!(read["content"]["cells"][0]["source"], "print('saved')");
    assert_eq!(read["content"]["cells"][1]["source"], "x = 1");
    let root = jupyter::get_contents(&client, &base, &headers, "").await?;
    assert_eq!(root["type"], "directory");
    assert_eq!(root["content"][0]["name"], path, "{root}");

    // Without the token (the portal's proxy adds it) nothing is served, and it is the token
    // that lets requests in.
    let refused = jupyter::get_contents(&client, &base, &Default::default(), path)
        .await
        .expect_err("no token, no contents");
    assert!(format!("{refused:#}").contains("403"), "{refused:#}");
    let refused = jupyter::start_kernel(&client, &base, &Default::default())
        .await
        .expect_err("no token, no kernel");
    assert!(format!("{refused:#}").contains("403"), "{refused:#}");

    let dir = server.root_dir();
    server.stop()?;
    assert!(
        !dir.exists(),
        "{} is removed with the server",
        dir.display()
    );
    Ok(())
}
