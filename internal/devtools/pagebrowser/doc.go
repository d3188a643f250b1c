// Package pagebrowser tests loopreplay's --html page in headless Chromium,
// driven from Go; it lives in the devtools module so that the browser
// driver is none of the root module's requirements.
package pagebrowser
