//! A real JMAP client, the `jmap-client` crate, against the server:
//! session, mailboxes, Email/query → Email/get through a result reference,
//! Email/set keywords, Email/import and download.

use jmap_client::client::Client;
use jmap_client::core::query::Filter;
use jmap_client::email;
use jmap_client::mailbox::{self, Role};

use crate::support::{PASSWORD, demo_messages, spawn_with_accounts};

#[tokio::test]
async fn jmap_client_lists_reads_flags_and_downloads() {
    let (app, [user]) = spawn_with_accounts(["ann@example.com"]).await;
    let messages = demo_messages();
    let ids = app.ingest(&user, &messages, 1_700_000_000).await;
    let client = Client::new()
        .credentials((user.email.as_str(), PASSWORD))
        .connect(&app.base)
        .await
        .expect("connect");

    let inbox_ids = client
        .mailbox_query(
            Some(mailbox::query::Filter::role(Role::Inbox)),
            None::<Vec<_>>,
        )
        .await
        .expect("Mailbox/query")
        .take_ids();
    assert_eq!(inbox_ids, vec![user.inbox.clone()]);
    let inbox = client
        .mailbox_get(&user.inbox, None::<Vec<_>>)
        .await
        .expect("Mailbox/get")
        .expect("inbox");
    assert_eq!(inbox.total_emails(), messages.len());
    assert_eq!(inbox.role(), Role::Inbox);

    let mut request = client.build();
    let query = request
        .query_email()
        .filter(Filter::from(email::query::Filter::in_mailbox(&user.inbox)))
        .sort([email::query::Comparator::received_at().is_ascending(false)]);
    let reference = query.result_reference();
    request.get_email().ids_ref(reference).properties([
        email::Property::Id,
        email::Property::Subject,
        email::Property::Preview,
        email::Property::ReceivedAt,
        email::Property::BlobId,
        email::Property::Size,
    ]);
    let mut response = request.send().await.expect("query and get");
    let list = response
        .pop_method_response()
        .expect("Email/get")
        .unwrap_get_email()
        .expect("get")
        .take_list();
    assert_eq!(list.len(), messages.len());
    assert_eq!(list[0].id(), Some(ids.last().unwrap().as_str()));
    let first = list.last().unwrap();
    assert_eq!(
        first.subject(),
        Some("Welcome to your Fastview demo mailbox")
    );
    assert!(!first.preview().unwrap_or_default().is_empty());

    client
        .email_set_keyword(&ids[0], "$seen", true)
        .await
        .expect("Email/set");
    let flagged = client
        .email_get(&ids[0], Some([email::Property::Keywords]))
        .await
        .expect("Email/get")
        .expect("email");
    assert_eq!(flagged.keywords(), vec!["$seen"]);

    let downloaded = client
        .download(first.blob_id().unwrap())
        .await
        .expect("download");
    assert_eq!(downloaded, messages[0]);
    assert_eq!(first.size(), messages[0].len());

    let imported = client
        .email_import(
            b"From: a@example.com\r\nSubject: via client\r\n\r\nhello\r\n".to_vec(),
            [&user.inbox],
            Some(["$draft"]),
            None,
        )
        .await
        .expect("Email/import");
    let found = client
        .email_query(
            Some(email::query::Filter::subject("via client")),
            None::<Vec<_>>,
        )
        .await
        .expect("Email/query")
        .take_ids();
    assert_eq!(found, vec![imported.id().unwrap().to_string()]);
}
