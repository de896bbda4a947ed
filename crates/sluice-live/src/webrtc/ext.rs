//! Sluice's two RTP header extensions on the WebRTC transport: the frame descriptor (with
//! the packet kind and Sluice's media sequence number) and Co-RTV's latest re-encoded frame.

use str0m::rtp::{ExtensionSerializer, ExtensionValues};

/// The URI of the frame-descriptor header extension.
pub const EXT_URI_FRAME: &str = "urn:x-sluice:frame";
/// The URI of the latest-re-encoded header extension.
pub const EXT_URI_LATEST: &str = "urn:x-sluice:latest-reencoded";
pub(super) const EXT_ID_FRAME: u8 = 12;
pub(super) const EXT_ID_LATEST: u8 = 14;
pub(super) const EXT_ID_CAPTURE: u8 = 9;

/// The frame-descriptor extension's value: a packet kind byte (0 video, 1 padding),
/// Sluice's media sequence number (2 bytes) and, for video, its 11-byte frame descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct FrameExt(pub(super) Vec<u8>);
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct LatestExt(pub(super) Vec<u8>);

pub(super) const KIND_VIDEO: u8 = 0;
pub(super) const KIND_PADDING: u8 = 1;

#[derive(Debug)]
pub(super) struct FrameSerializer;
impl ExtensionSerializer for FrameSerializer {
    fn write_to(&self, buf: &mut [u8], ev: &ExtensionValues) -> usize {
        match ev.user_values.get::<FrameExt>() {
            Some(v) if buf.len() >= v.0.len() => {
                buf[..v.0.len()].copy_from_slice(&v.0);
                v.0.len()
            }
            _ => 0,
        }
    }
    fn parse_value(&self, buf: &[u8], ev: &mut ExtensionValues) -> bool {
        if buf.len() != 3 && buf.len() != 14 {
            return false;
        }
        ev.user_values.set(FrameExt(buf.to_vec()));
        true
    }
    fn is_video(&self) -> bool {
        true
    }
    fn is_audio(&self) -> bool {
        false
    }
}

#[derive(Debug)]
pub(super) struct LatestSerializer;
impl ExtensionSerializer for LatestSerializer {
    fn write_to(&self, buf: &mut [u8], ev: &ExtensionValues) -> usize {
        match ev.user_values.get::<LatestExt>() {
            Some(v) if buf.len() >= 4 && v.0.len() == 4 => {
                buf[..4].copy_from_slice(&v.0);
                4
            }
            _ => 0,
        }
    }
    fn parse_value(&self, buf: &[u8], ev: &mut ExtensionValues) -> bool {
        if buf.len() != 4 {
            return false;
        }
        ev.user_values.set(LatestExt(buf.to_vec()));
        true
    }
    fn is_video(&self) -> bool {
        true
    }
    fn is_audio(&self) -> bool {
        false
    }
}
