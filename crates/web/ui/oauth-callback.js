// The OAuth callback page: the authorization server redirected here. Hands the query
// (code, state, error) to the app's own page, which completes the login through the
// API; this page holds no secret and calls no API itself.
(function () {
  "use strict";
  var q = new URLSearchParams(location.search);
  var msg = {
    type: "mcp-oauth-callback",
    code: q.get("code"),
    state: q.get("state"),
    error: q.get("error"),
    errorDescription: q.get("error_description"),
    iss: q.get("iss")
  };
  var status = document.getElementById("status");
  // Drop the code from the address bar and history.
  try { history.replaceState(null, "", location.pathname); } catch (_) { /* ignore */ }
  var opener = null;
  try { opener = window.opener && !window.opener.closed ? window.opener : null; } catch (_) { opener = null; }
  if (opener) {
    opener.postMessage(msg, location.origin);
    status.dataset.oauthCallback = "posted";
    status.textContent = msg.error ? "The login was not completed. You can close this window." : "Login received. This window closes by itself.";
    setTimeout(function () { window.close(); }, 300);
    return;
  }
  // No opener (the popup was blocked and this is the app's own tab, or a mobile
  // browser): keep the result for this tab and resume on the settings page.
  try {
    sessionStorage.setItem("mcp-oauth-callback", JSON.stringify(msg));
  } catch (_) {
    status.className = "error";
    status.textContent = "Cannot hand the login back to Switchboard (session storage is unavailable).";
    return;
  }
  status.dataset.oauthCallback = "redirecting";
  location.replace("/settings?mcp-oauth-return=1");
})();
