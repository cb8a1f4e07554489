# libtrack 2.0 renames (branch lib). Apply with:
#   git grep -lz -e track_ -e crc32c | xargs -0 sed -i -f docs/renames-2.0.sed
# (and git mv the four man pages named after the old functions)
# Internal (hidden) helpers: no public prefix in libtrack.a.
s/\btrack_crc32c_sw\b/trk_crc32c_sw/g
s/\btrack_crc32c_hw\b/trk_crc32c_hw/g
s/\btrack_crc32c\b/trk_crc32c/g
s/\btrack_dm_parse_status\b/trk_dm_parse_status/g
# Functions named like a type: keep the types, rename the functions.
s/\bstruct track_dm_status\b/struct @@TRACK_DM_STATUS@@/g
s/\btrack_dm_status\b/track_dm_get_status/g
s/\bstruct @@TRACK_DM_STATUS@@/struct track_dm_status/g
s/\benum track_watch_mode\b/enum @@TRACK_WATCH_MODE@@/g
s/\btrack_watch_mode\b/track_watch_get_mode/g
s/\benum @@TRACK_WATCH_MODE@@/enum track_watch_mode/g
# One way to release a handle: _free.
s/\btrack_dm_close\b/track_dm_free/g
s/\btrack_watch_close\b/track_watch_free/g
# Man page titles.
s/^\.TH TRACK_DM_STATUS /.TH TRACK_DM_GET_STATUS /
s/^\.TH TRACK_WATCH_MODE /.TH TRACK_WATCH_GET_MODE /
s/^\.TH TRACK_DM_CLOSE /.TH TRACK_DM_FREE /
s/^\.TH TRACK_WATCH_CLOSE /.TH TRACK_WATCH_FREE /
