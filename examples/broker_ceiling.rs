//! The raw request-reply ceiling of a message broker, measured with the same
//! client crate jrpc's broker transport uses: an echo responder that does no
//! JSON work, and callers that send a JSON-RPC-sized payload and wait for
//! its echo. `jrpc bench` over the same broker is compared against it (see
//! BENCHMARKS.md).
//!
//! ```sh
//! broker_ceiling respond nats nats://127.0.0.1:4222 &
//! broker_ceiling call nats nats://127.0.0.1:4222 -c 16 -m 64 -d 5
//! ```
//!
//! Brokers: `nats` (`nats://HOST:PORT`, subject `ceiling` in a queue
//! group), `mqtt` (`mqtt://HOST:PORT`, topic `ceiling` in a shared
//! subscription, QoS 1, Response Topic and Correlation Data), `amqp`
//! (`amqp://HOST:PORT/%2f`, queue `ceiling`, direct reply-to,
//! acknowledged after the reply). `call` prints one JSON line: requests,
//! requests per second, p50 and p99 in milliseconds.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::oneshot;

/// The size of `{"jsonrpc":"2.0","method":"add","params":[1,2],"id":N}`.
const PAYLOAD: &[u8] = br#"{"jsonrpc":"2.0","method":"add","params":[1,2],"id":12345}"#;
const ADDRESS: &str = "ceiling";

type Outcome = Result<(), Box<dyn std::error::Error + Send + Sync>>;

#[tokio::main]
async fn main() -> Outcome {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: broker_ceiling respond|call nats|mqtt|amqp URL [-c N] [-m M] [-d SECONDS]";
    let [role, kind, url, rest @ ..] = args.as_slice() else {
        return Err(usage.into());
    };
    let mut settings = (16usize, 64usize, 5u64);
    for pair in rest.chunks(2) {
        match pair {
            [flag, value] if flag == "-c" => settings.0 = value.parse()?,
            [flag, value] if flag == "-m" => settings.1 = value.parse()?,
            [flag, value] if flag == "-d" => settings.2 = value.parse()?,
            _ => return Err(usage.into()),
        }
    }
    let (connections, in_flight, seconds) = settings;
    match (role.as_str(), kind.as_str()) {
        ("respond", "nats") => nats::respond(url).await,
        ("respond", "mqtt") => mqtt::respond(url).await,
        ("respond", "amqp") => amqp::respond(url).await,
        ("call", kind) => {
            let deadline = Instant::now() + Duration::from_secs(seconds);
            let mut workers = Vec::new();
            for c in 0..connections {
                let caller: Arc<dyn Caller> = match kind {
                    "nats" => Arc::new(nats::Calling::connect(url).await?),
                    "mqtt" => Arc::new(mqtt::Calling::connect(url, c).await?),
                    "amqp" => Arc::new(amqp::Calling::connect(url).await?),
                    _ => return Err(usage.into()),
                };
                for _ in 0..in_flight {
                    let caller = Arc::clone(&caller);
                    workers.push(tokio::spawn(async move {
                        let mut latencies = Vec::new();
                        while Instant::now() < deadline {
                            let started = Instant::now();
                            if caller.request().await.is_err() {
                                break;
                            }
                            latencies.push(started.elapsed().as_micros() as u64);
                        }
                        latencies
                    }));
                }
            }
            let started = Instant::now();
            let mut latencies = Vec::new();
            for worker in workers {
                latencies.extend(worker.await?);
            }
            let elapsed = started.elapsed().as_secs_f64();
            latencies.sort_unstable();
            let at = |q: f64| {
                latencies.get(((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1)))
            };
            println!(
                "{{\"broker\":\"{kind}\",\"requests\":{},\"requests_per_second\":{:.0},\"p50_ms\":{:.3},\"p99_ms\":{:.3}}}",
                latencies.len(),
                latencies.len() as f64 / elapsed,
                at(0.5).copied().unwrap_or(0) as f64 / 1000.0,
                at(0.99).copied().unwrap_or(0) as f64 / 1000.0,
            );
            Ok(())
        }
        _ => Err(usage.into()),
    }
}

/// One connection's way to send a payload and wait for its echo.
trait Caller: Send + Sync + 'static {
    fn request(&self) -> futures_util::future::BoxFuture<'_, Outcome>;
}

/// Replies awaited, by correlation id.
#[derive(Default)]
struct Waiting {
    next: AtomicU64,
    replies: Mutex<HashMap<u64, oneshot::Sender<()>>>,
}

impl Waiting {
    fn register(&self) -> (u64, oneshot::Receiver<()>) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (sender, receiver) = oneshot::channel();
        self.replies.lock().unwrap().insert(id, sender);
        (id, receiver)
    }

    fn resolve(&self, id: &[u8]) {
        let id = std::str::from_utf8(id).ok().and_then(|id| id.parse().ok());
        if let Some(sender) = id.and_then(|id| self.replies.lock().unwrap().remove(&id)) {
            let _ = sender.send(());
        }
    }
}

mod nats {
    use super::*;

    pub async fn respond(url: &str) -> Outcome {
        let client = async_nats::connect(url).await?;
        let mut requests = client.queue_subscribe(ADDRESS, ADDRESS.into()).await?;
        while let Some(message) = requests.next().await {
            if let Some(reply) = message.reply {
                client.publish(reply, message.payload).await?;
            }
        }
        Ok(())
    }

    pub struct Calling(async_nats::Client);

    impl Calling {
        pub async fn connect(url: &str) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
            Ok(Calling(async_nats::connect(url).await?))
        }
    }

    impl Caller for Calling {
        fn request(&self) -> futures_util::future::BoxFuture<'_, Outcome> {
            Box::pin(async move {
                self.0.request(ADDRESS, Bytes::from_static(PAYLOAD)).await?;
                Ok(())
            })
        }
    }
}

mod mqtt {
    use rumqttc::v5::mqttbytes::v5::{Packet, PublishProperties};
    use rumqttc::v5::mqttbytes::QoS;
    use rumqttc::v5::{AsyncClient, Event, MqttOptions};

    use super::*;

    fn options(url: &str, id: String) -> Result<MqttOptions, Box<dyn std::error::Error + Send + Sync>> {
        let rest = url.trim_start_matches("mqtt://").trim_end_matches('/');
        let (host, port) = rest.rsplit_once(':').ok_or("expected mqtt://HOST:PORT")?;
        let mut options = MqttOptions::new(id, host, port.parse()?);
        options
            .set_request_channel_capacity(4096)
            .set_keep_alive(Duration::from_secs(30));
        Ok(options)
    }

    pub async fn respond(url: &str) -> Outcome {
        let (client, mut events) = AsyncClient::new(
            options(url, format!("ceiling-responder-{}", std::process::id()))?,
            4096,
        );
        client
            .subscribe(format!("$share/{ADDRESS}/{ADDRESS}"), QoS::AtLeastOnce)
            .await?;
        loop {
            if let Event::Incoming(Packet::Publish(publish)) = events.poll().await? {
                let Some(properties) = publish.properties else {
                    continue;
                };
                let Some(topic) = properties.response_topic else {
                    continue;
                };
                let reply = PublishProperties {
                    correlation_data: properties.correlation_data,
                    ..PublishProperties::default()
                };
                let client = client.clone();
                tokio::spawn(async move {
                    let _ = client
                        .publish_with_properties(topic, QoS::AtLeastOnce, false, publish.payload, reply)
                        .await;
                });
            }
        }
    }

    pub struct Calling {
        client: AsyncClient,
        replies: String,
        waiting: Arc<Waiting>,
    }

    impl Calling {
        pub async fn connect(url: &str, n: usize) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
            let id = format!("ceiling-caller-{}-{n}", std::process::id());
            let replies = format!("{ADDRESS}/replies/{id}");
            let (client, mut events) = AsyncClient::new(options(url, id)?, 4096);
            client.subscribe(replies.clone(), QoS::AtLeastOnce).await?;
            let waiting = Arc::new(Waiting::default());
            let resolving = Arc::clone(&waiting);
            // Wait for the subscription before the first call.
            let (ready, subscribed) = oneshot::channel();
            tokio::spawn(async move {
                let mut ready = Some(ready);
                while let Ok(event) = events.poll().await {
                    match event {
                        Event::Incoming(Packet::SubAck(_)) => {
                            if let Some(ready) = ready.take() {
                                let _ = ready.send(());
                            }
                        }
                        Event::Incoming(Packet::Publish(publish)) => {
                            if let Some(id) = publish.properties.and_then(|p| p.correlation_data) {
                                resolving.resolve(&id);
                            }
                        }
                        _ => {}
                    }
                }
            });
            subscribed.await?;
            Ok(Calling {
                client,
                replies,
                waiting,
            })
        }
    }

    impl Caller for Calling {
        fn request(&self) -> futures_util::future::BoxFuture<'_, Outcome> {
            Box::pin(async move {
                let (id, reply) = self.waiting.register();
                let properties = PublishProperties {
                    response_topic: Some(self.replies.clone()),
                    correlation_data: Some(Bytes::from(id.to_string())),
                    ..PublishProperties::default()
                };
                self.client
                    .publish_with_properties(ADDRESS, QoS::AtLeastOnce, false, PAYLOAD, properties)
                    .await?;
                reply.await?;
                Ok(())
            })
        }
    }
}

mod amqp {
    use lapin::options::{
        BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions, QueueDeclareOptions,
    };
    use lapin::types::{FieldTable, ShortString};
    use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};

    use super::*;

    async fn connect(url: &str) -> lapin::Result<Connection> {
        let properties = ConnectionProperties::default()
            .with_executor(tokio_executor_trait::Tokio::current())
            .with_reactor(tokio_reactor_trait::Tokio);
        Connection::connect(url, properties).await
    }

    pub async fn respond(url: &str) -> Outcome {
        let connection = connect(url).await?;
        let channel = connection.create_channel().await?;
        channel.basic_qos(128, BasicQosOptions::default()).await?;
        channel
            .queue_declare(ADDRESS, QueueDeclareOptions::default(), FieldTable::default())
            .await?;
        let mut deliveries = channel
            .basic_consume(ADDRESS, "", BasicConsumeOptions::default(), FieldTable::default())
            .await?;
        while let Some(delivery) = deliveries.next().await {
            let delivery = delivery?;
            if let Some(reply_to) = delivery.properties.reply_to() {
                let mut properties = BasicProperties::default();
                if let Some(id) = delivery.properties.correlation_id() {
                    properties = properties.with_correlation_id(id.clone());
                }
                channel
                    .basic_publish(
                        "",
                        reply_to.as_str(),
                        BasicPublishOptions::default(),
                        &delivery.data,
                        properties,
                    )
                    .await?;
            }
            delivery.acker.ack(BasicAckOptions::default()).await?;
        }
        Ok(())
    }

    pub struct Calling {
        // Kept open as long as the channel.
        _connection: Connection,
        channel: Channel,
        waiting: Arc<Waiting>,
    }

    impl Calling {
        pub async fn connect(url: &str) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
            let connection = connect(url).await?;
            let channel = connection.create_channel().await?;
            let no_ack = BasicConsumeOptions {
                no_ack: true,
                ..BasicConsumeOptions::default()
            };
            let mut replies = channel
                .basic_consume("amq.rabbitmq.reply-to", "", no_ack, FieldTable::default())
                .await?;
            let waiting = Arc::new(Waiting::default());
            let resolving = Arc::clone(&waiting);
            tokio::spawn(async move {
                while let Some(Ok(delivery)) = replies.next().await {
                    if let Some(id) = delivery.properties.correlation_id() {
                        resolving.resolve(id.as_str().as_bytes());
                    }
                }
            });
            Ok(Calling {
                _connection: connection,
                channel,
                waiting,
            })
        }
    }

    impl Caller for Calling {
        fn request(&self) -> futures_util::future::BoxFuture<'_, Outcome> {
            Box::pin(async move {
                let (id, reply) = self.waiting.register();
                let properties = BasicProperties::default()
                    .with_reply_to(ShortString::from("amq.rabbitmq.reply-to"))
                    .with_correlation_id(ShortString::from(id.to_string()));
                self.channel
                    .basic_publish("", ADDRESS, BasicPublishOptions::default(), PAYLOAD, properties)
                    .await?;
                reply.await?;
                Ok(())
            })
        }
    }
}
