//! Content blocks: what tools return, prompts hold and resources contain.

use serde::{Deserialize, Serialize};

use super::Meta;

/// Who a message is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The user.
    User,
    /// The assistant (the model).
    Assistant,
}

/// Hints to the client about how to use a piece of content.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Annotations {
    /// Who it is meant for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<Vec<Role>>,
    /// How important it is, from 0 (least) to 1 (most).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<f64>,
    /// When it last changed (ISO 8601).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
}

/// Text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextContent {
    /// The text.
    pub text: String,
    /// Hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// An image, base64-encoded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageContent {
    /// The image's bytes in base64.
    pub data: String,
    /// Its MIME type.
    pub mime_type: String,
    /// Hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// Audio, base64-encoded.
pub type AudioContent = ImageContent;

/// A link to a resource the client may read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceLink {
    /// The resource's URI.
    pub uri: String,
    /// Its programmatic name.
    pub name: String,
    /// A name for people to read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Its size in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// A resource's contents, embedded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbeddedResource {
    /// The contents.
    pub resource: ResourceContents,
    /// Hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// One block of content, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// `"text"`.
    Text(TextContent),
    /// `"image"`.
    Image(ImageContent),
    /// `"audio"`.
    Audio(AudioContent),
    /// `"resource_link"`.
    ResourceLink(ResourceLink),
    /// `"resource"`: embedded contents.
    Resource(EmbeddedResource),
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text(TextContent {
            text: text.into(),
            annotations: None,
            meta: None,
        })
    }

    /// An image block: base64 `data` of the given MIME type.
    pub fn image(data: impl Into<String>, mime_type: impl Into<String>) -> Self {
        ContentBlock::Image(ImageContent {
            data: data.into(),
            mime_type: mime_type.into(),
            annotations: None,
            meta: None,
        })
    }

    /// The text, when this is a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            ContentBlock::Text(t) => Some(&t.text),
            _ => None,
        }
    }
}

/// A text resource's contents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextResourceContents {
    /// The resource's URI.
    pub uri: String,
    /// Its MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// The text.
    pub text: String,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// A binary resource's contents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlobResourceContents {
    /// The resource's URI.
    pub uri: String,
    /// Its MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// The bytes in base64.
    pub blob: String,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// A resource's contents: text or a base64 blob.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ResourceContents {
    /// Text.
    Text(TextResourceContents),
    /// Bytes.
    Blob(BlobResourceContents),
}

impl ResourceContents {
    /// Text contents of `uri`.
    pub fn text(uri: impl Into<String>, mime_type: Option<&str>, text: impl Into<String>) -> Self {
        ResourceContents::Text(TextResourceContents {
            uri: uri.into(),
            mime_type: mime_type.map(str::to_owned),
            text: text.into(),
            meta: None,
        })
    }

    /// Binary contents of `uri`, base64 `blob`.
    pub fn blob(uri: impl Into<String>, mime_type: Option<&str>, blob: impl Into<String>) -> Self {
        ResourceContents::Blob(BlobResourceContents {
            uri: uri.into(),
            mime_type: mime_type.map(str::to_owned),
            blob: blob.into(),
            meta: None,
        })
    }

    /// The URI the contents belong to.
    pub fn uri(&self) -> &str {
        match self {
            ResourceContents::Text(t) => &t.uri,
            ResourceContents::Blob(b) => &b.uri,
        }
    }
}

/// The kinds of [`ContentBlock`], as `type` names them.
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum Kind {
    Text,
    Image,
    Audio,
    ResourceLink,
    Resource,
}

impl Kind {
    /// The block of this kind that `fields` (the block's other members)
    /// make.
    fn block<'de, D: serde::Deserializer<'de>>(self, fields: D) -> Result<ContentBlock, D::Error> {
        Ok(match self {
            Kind::Text => ContentBlock::Text(Deserialize::deserialize(fields)?),
            Kind::Image => ContentBlock::Image(Deserialize::deserialize(fields)?),
            Kind::Audio => ContentBlock::Audio(Deserialize::deserialize(fields)?),
            Kind::ResourceLink => ContentBlock::ResourceLink(Deserialize::deserialize(fields)?),
            Kind::Resource => ContentBlock::Resource(Deserialize::deserialize(fields)?),
        })
    }
}

/// Read as serde reads an enum tagged by `type`, without first gathering
/// the whole block when `type` comes first, as every writer puts it: the
/// members after it go straight into the block of that kind. (serde's
/// own gathers every block into a tree of its own, then reads that: a
/// third of what a tool's result costs a client to decode.)
impl<'de> Deserialize<'de> for ContentBlock {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(BlockVisitor)
    }
}

struct BlockVisitor;

impl<'de> serde::de::Visitor<'de> for BlockVisitor {
    type Value = ContentBlock;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a content block: an object with a `type`")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<ContentBlock, A::Error> {
        use serde::de::Error as _;
        let Some(MemberName(first)) = map.next_key()? else {
            return Err(A::Error::missing_field("type"));
        };
        if first == "type" {
            let kind: Kind = map.next_value()?;
            return kind.block(serde::de::value::MapAccessDeserializer::new(Rest(map)));
        }
        let mut gathered = serde_json::Map::new();
        gathered.insert(first.into_owned(), map.next_value()?);
        // `type` further on: the members gathered, then read as the block
        // of the kind it names (serde's way, and its errors). A member
        // named twice is refused, as serde refuses a field given twice
        // (the tree would keep only the last).
        while let Some((key, value)) = map.next_entry::<String, serde_json::Value>()? {
            if gathered.contains_key(&key) {
                return Err(A::Error::custom(format_args!("duplicate field `{key}`")));
            }
            gathered.insert(key, value);
        }
        let kind = gathered
            .remove("type")
            .ok_or_else(|| A::Error::missing_field("type"))?;
        let kind = Kind::deserialize(kind).map_err(A::Error::custom)?;
        kind.block(serde_json::Value::Object(gathered))
            .map_err(A::Error::custom)
    }
}

/// The members after a first `type`, for the block's own struct to read:
/// a second `type` is refused, as serde refuses a field given twice.
struct Rest<A>(A);

impl<'de, A: serde::de::MapAccess<'de>> serde::de::MapAccess<'de> for Rest<A> {
    type Error = A::Error;

    fn next_key_seed<K: serde::de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        use serde::de::Error as _;
        let Some(MemberName(name)) = self.0.next_key()? else {
            return Ok(None);
        };
        if name == "type" {
            return Err(A::Error::duplicate_field("type"));
        }
        seed.deserialize(serde::de::value::CowStrDeserializer::new(name))
            .map(Some)
    }

    fn next_value_seed<V: serde::de::DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.0.next_value_seed(seed)
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

/// A member's name, borrowed from the input when it can be.
struct MemberName<'de>(std::borrow::Cow<'de, str>);

impl<'de> Deserialize<'de> for MemberName<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NameVisitor;
        impl<'de> serde::de::Visitor<'de> for NameVisitor {
            type Value = MemberName<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a member name")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, name: &'de str) -> Result<Self::Value, E> {
                Ok(MemberName(std::borrow::Cow::Borrowed(name)))
            }
            fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<Self::Value, E> {
                Ok(MemberName(std::borrow::Cow::Owned(name.to_owned())))
            }
            fn visit_string<E: serde::de::Error>(self, name: String) -> Result<Self::Value, E> {
                Ok(MemberName(std::borrow::Cow::Owned(name)))
            }
        }
        deserializer.deserialize_str(NameVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(value: serde_json::Value) -> Result<ContentBlock, String> {
        // Through text, as a client reads it, and through a value.
        let from_text = serde_json::from_str::<ContentBlock>(&value.to_string()).map_err(|e| e.to_string());
        let from_value = serde_json::from_value::<ContentBlock>(value).map_err(|e| e.to_string());
        assert_eq!(
            from_text.is_ok(),
            from_value.is_ok(),
            "{from_text:?} vs {from_value:?}"
        );
        from_text
    }

    #[test]
    fn every_kind_reads_back_what_it_wrote_with_type_first_or_last() {
        let blocks = [
            ContentBlock::text("hi"),
            ContentBlock::image("aGk=", "image/png"),
            ContentBlock::Audio(AudioContent {
                data: "aGk=".into(),
                mime_type: "audio/wav".into(),
                annotations: None,
                meta: None,
            }),
            ContentBlock::ResourceLink(ResourceLink {
                uri: "file:///a".into(),
                name: "a".into(),
                title: Some("A".into()),
                description: None,
                mime_type: None,
                size: Some(3),
                annotations: None,
                meta: None,
            }),
            ContentBlock::Resource(EmbeddedResource {
                resource: ResourceContents::text("file:///a", Some("text/plain"), "x"),
                annotations: Some(Annotations {
                    priority: Some(0.5),
                    ..Default::default()
                }),
                meta: Some(json!({"k": [1, {"n": null}]}).as_object().unwrap().clone()),
            }),
        ];
        for block in blocks {
            let text = serde_json::to_string(&block).unwrap();
            assert!(text.starts_with(r#"{"type":"#), "{text}");
            assert_eq!(serde_json::from_str::<ContentBlock>(&text).unwrap(), block);
            let written = serde_json::to_value(&block).unwrap();
            assert_eq!(read(written.clone()).unwrap(), block);
            // `type` last: every other member first.
            let object = written.as_object().unwrap();
            let mut last = String::from("{");
            for (key, value) in object.iter().filter(|(k, _)| *k != "type") {
                last.push_str(&format!("{}:{value},", serde_json::to_string(key).unwrap()));
            }
            last.push_str(&format!(r#""type":{}}}"#, object["type"]));
            assert_eq!(
                serde_json::from_str::<ContentBlock>(&last).unwrap(),
                block,
                "{last}"
            );
        }
    }

    #[test]
    fn a_block_without_a_known_type_is_refused_with_serdes_words() {
        let cases = [
            (json!({"text": "hi"}), "missing field `type`"),
            (json!({}), "missing field `type`"),
            (json!({"type": "video", "data": "x"}), "unknown variant `video`"),
            (json!({"text": "hi", "type": "video"}), "unknown variant `video`"),
            (json!({"type": 3, "text": "hi"}), "invalid type: integer `3`"),
            (json!({"type": "text"}), "missing field `text`"),
            (
                json!({"annotations": null, "type": "text"}),
                "missing field `text`",
            ),
            (json!({"type": "text", "text": 5}), "invalid type: integer `5`"),
            (json!(["text", "hi"]), "invalid type: sequence"),
            (json!("text"), "invalid type: string"),
        ];
        for (value, said) in cases {
            let error = read(value.clone()).expect_err(&value.to_string());
            assert!(error.contains(said), "{value}: {error}");
        }
    }

    #[test]
    fn a_member_given_twice_is_refused_as_serde_refuses_a_field_given_twice() {
        for text in [
            r#"{"type":"text","text":"a","type":"image"}"#,
            r#"{"type":"text","type":"text","text":"a"}"#,
            r#"{"text":"a","type":"text","type":"image"}"#,
            r#"{"text":"a","type":"text","text":"b"}"#,
            r#"{"type":"text","text":"a","text":"b"}"#,
        ] {
            let error = serde_json::from_str::<ContentBlock>(text)
                .expect_err(text)
                .to_string();
            assert!(error.contains("duplicate field"), "{text}: {error}");
        }
    }

    #[test]
    fn members_it_does_not_know_are_skipped_wherever_they_are() {
        let block =
            read(json!({"extra": {"deep": [1]}, "type": "text", "text": "hi", "more": true})).unwrap();
        assert_eq!(block, ContentBlock::text("hi"));
        let block = read(json!({"type": "text", "more": [], "text": "hi"})).unwrap();
        assert_eq!(block, ContentBlock::text("hi"));
    }
}
