// SPDX-License-Identifier: GPL-2.0-only
/*
 * dm-track: the generic netlink family that reads the dirty sets.
 *
 * DM_TRACK_CMD_GET_EXTENTS is a dump. Each call of the dump callback finds
 * the device again (by the serial noted on the first call), so a device
 * removed or reloaded during the dump ends it with -ENODEV instead of
 * leaving a dangling pointer; a message that changes the sets during the
 * dump (freeze, commit, abort, clear, mark_all) ends it with -ESTALE, so a
 * reader never takes a set that lost blocks behind its cursor for whole.
 */
#include "dm-track.h"

#include <linux/dm-track.h>
#include <net/genetlink.h>

struct track_dump_ctx {
	u64 serial;	/* which target */
	u64 pos;	/* next block to report */
	u64 epoch;	/* epoch of the set when the dump began */
	u64 seq;	/* tc->set_seq when the dump began */
	u8 set;
	bool started;
};

static const struct nla_policy track_policy[DM_TRACK_ATTR_MAX + 1] = {
	[DM_TRACK_ATTR_DEV_NAME] = { .type = NLA_NUL_STRING, .len = 127 },
	[DM_TRACK_ATTR_DEV_UUID] = { .type = NLA_NUL_STRING, .len = 128 },
	[DM_TRACK_ATTR_SET] = NLA_POLICY_MAX(NLA_U8, DM_TRACK_SET_FROZEN),
	[DM_TRACK_ATTR_START] = { .type = NLA_U64 },
};

static struct genl_family track_genl_family;

static struct track_bitset *dump_set(struct track_c *tc, u8 set, u64 *epoch)
{
	if (set == DM_TRACK_SET_FROZEN) {
		*epoch = tc->frozen_epoch;
		return tc->frozen;
	}
	*epoch = tc->epoch;
	return rcu_dereference_protected(tc->active,
					 lockdep_is_held(&tc->lock));
}

static int track_dump_start(struct netlink_callback *cb)
{
	const struct genl_info *info = genl_info_dump(cb);
	struct track_dump_ctx *ctx = (void *)cb->ctx;
	const char *name = NULL, *uuid = NULL;
	struct track_c *tc;

	BUILD_BUG_ON(sizeof(*ctx) > sizeof(cb->ctx));

	/* GENL_ADMIN_PERM checks CAP_NET_ADMIN; the sets are dm's business. */
	if (!netlink_capable(cb->skb, CAP_SYS_ADMIN))
		return -EPERM;

	if (info->attrs[DM_TRACK_ATTR_DEV_NAME])
		name = nla_data(info->attrs[DM_TRACK_ATTR_DEV_NAME]);
	if (info->attrs[DM_TRACK_ATTR_DEV_UUID])
		uuid = nla_data(info->attrs[DM_TRACK_ATTR_DEV_UUID]);
	if (!name && !uuid) {
		NL_SET_ERR_MSG(cb->extack, "name the device by dm name or uuid");
		return -EINVAL;
	}
	ctx->set = info->attrs[DM_TRACK_ATTR_SET] ?
		   nla_get_u8(info->attrs[DM_TRACK_ATTR_SET]) :
		   DM_TRACK_SET_ACTIVE;
	ctx->pos = info->attrs[DM_TRACK_ATTR_START] ?
		   nla_get_u64(info->attrs[DM_TRACK_ATTR_START]) : 0;

	tc = track_lookup_lock(name, uuid, 0);
	if (IS_ERR(tc)) {
		NL_SET_ERR_MSG(cb->extack, "no dm-track device by that name");
		return PTR_ERR(tc);
	}
	ctx->serial = tc->serial;
	ctx->seq = tc->set_seq;
	if (!dump_set(tc, ctx->set, &ctx->epoch)) {
		track_unlock(tc);
		NL_SET_ERR_MSG(cb->extack, "nothing is frozen");
		return -ENOENT;
	}
	track_unlock(tc);
	return 0;
}

static int track_dump(struct sk_buff *skb, struct netlink_callback *cb)
{
	struct track_dump_ctx *ctx = (void *)cb->ctx;
	struct dm_track_extent *ext;
	struct track_bitset *bs;
	struct track_c *tc;
	unsigned int n = 0, room;
	struct nlattr *attr;
	u64 epoch, first, count;
	void *hdr;
	int r = 0;

	tc = track_lookup_lock(NULL, NULL, ctx->serial);
	if (IS_ERR(tc)) {
		NL_SET_ERR_MSG(cb->extack, "the device went away during the dump");
		return PTR_ERR(tc);
	}
	bs = dump_set(tc, ctx->set, &epoch);
	if (!bs || epoch != ctx->epoch || tc->set_seq != ctx->seq) {
		NL_SET_ERR_MSG(cb->extack, "the set changed during the dump");
		r = -ESTALE;
		goto out;
	}
	if (ctx->pos >= bs->nr_blocks)
		goto out;

	hdr = genlmsg_put(skb, NETLINK_CB(cb->skb).portid, cb->nlh->nlmsg_seq,
			  &track_genl_family, NLM_F_MULTI,
			  DM_TRACK_CMD_GET_EXTENTS);
	if (!hdr) {
		r = -EMSGSIZE;
		goto out;
	}
	if (nla_put_u64_64bit(skb, DM_TRACK_ATTR_EPOCH, epoch,
			      DM_TRACK_ATTR_PAD))
		goto cancel;

	/* As many extents as fit in what is left of this message. */
	if (skb_tailroom(skb) < nla_total_size_64bit(sizeof(*ext)))
		goto cancel;
	room = (skb_tailroom(skb) - nla_total_size_64bit(0)) / sizeof(*ext);
	attr = nla_reserve_64bit(skb, DM_TRACK_ATTR_EXTENTS,
				 room * sizeof(*ext), DM_TRACK_ATTR_PAD);
	if (!attr)
		goto cancel;
	ext = nla_data(attr);
	while (n < room && track_bitset_next_run(bs, ctx->pos, &first, &count)) {
		ext[n].first = first;
		ext[n].count = count;
		ctx->pos = first + count;
		n++;
	}
	if (n < room) {
		ctx->pos = bs->nr_blocks;
		nlmsg_trim(skb, (char *)attr + nla_total_size(n * sizeof(*ext)));
		attr->nla_len = nla_attr_size(n * sizeof(*ext));
	}
	genlmsg_end(skb, hdr);
	r = skb->len;
	goto out;

cancel:
	genlmsg_cancel(skb, hdr);
	r = -EMSGSIZE;
out:
	track_unlock(tc);
	return r;
}

static const struct genl_ops track_genl_ops[] = {
	{
		.cmd = DM_TRACK_CMD_GET_EXTENTS,
		.flags = GENL_ADMIN_PERM,
		.start = track_dump_start,
		.dumpit = track_dump,
	},
};

static struct genl_family track_genl_family __ro_after_init = {
	.name = DM_TRACK_GENL_NAME,
	.version = DM_TRACK_GENL_VERSION,
	.maxattr = DM_TRACK_ATTR_MAX,
	.policy = track_policy,
	.module = THIS_MODULE,
	.ops = track_genl_ops,
	.n_ops = ARRAY_SIZE(track_genl_ops),
	.netnsok = false,
};

int __init track_netlink_init(void)
{
	return genl_register_family(&track_genl_family);
}

void track_netlink_exit(void)
{
	genl_unregister_family(&track_genl_family);
}
