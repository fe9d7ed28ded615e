// Package githubhook holds what every receiver of GitHub webhook
// deliveries shares: the X-Hub-Signature-256 check over the raw body and
// the reading of the event's JSON from either content type GitHub sends
// (application/json, or application/x-www-form-urlencoded, its default,
// with the JSON in the "payload" field).
package githubhook
