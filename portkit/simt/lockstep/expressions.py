"""Expressions of a kernel rewritten for lanes: subscripts become checked loads,
``and``/``or``/``not``/``if-else`` per-lane choices, barriers and warp operations
``ctx.wait``, allocations ``ctx.shared/local/const``, device-function calls calls of
their lane versions."""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

from portkit.simt.lockstep.syntax import ctx_call, lambda_of, name_node
from portkit.simt.numba_forms import (
    bool_literal,
    is_bool,
    is_bool_call,
    power_call,
    without_alignment,
)
from portkit.simt.scalars import typed_constant
from portkit.simt.transform import ALLOCATORS, WAITING_INTRINSICS, is_device_function


class Unsupported(Exception):
    """The lockstep engine cannot run this (construct, value or fault); the per-thread
    engine runs the launch instead. The message says why."""


def _lanes_is_bool(value: Any, literal: bool) -> Any:
    if isinstance(value, np.ndarray):  # one value per lane (lanes.is_lanes)
        if value.dtype != np.bool_:
            return np.zeros(value.shape, dtype=np.bool_)
        return value == literal
    return is_bool(value, literal)


def _without_recursion(owner: Any, value: Any) -> Any:
    """The lane version of a device function; recursion is not vectorised."""
    calling = owner.__dict__.setdefault("_pk_calling", set())
    if id(value) in calling:
        raise Unsupported(f"{value.py_func.__name__} calls itself (recursion)")
    calling.add(id(value))
    try:
        return owner.rewrite(value, device=True)
    finally:
        calling.discard(id(value))


class Expressions(ast.NodeTransformer):
    def __init__(self, body: Any) -> None:  # vectorize._Body
        self.body = body

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load):
            self.body.loaded.add(node.id)
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        value = typed_constant(node.value)
        if value is node.value:
            return node
        name = self.body.owner.fresh("k")
        self.body.namespace[name] = value
        return ast.copy_location(name_node(name), node)

    def visit_Slice(self, node: ast.Slice) -> ast.AST:
        self.generic_visit(node)
        parts = [
            p if p is not None else ast.Constant(None) for p in (node.lower, node.upper, node.step)
        ]
        call = ast.Call(func=name_node("__pk_slice"), args=parts, keywords=[])
        return ast.copy_location(call, node)

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        return ast.copy_location(ctx_call("load", node.value, node.slice), node)

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        method = "and_" if isinstance(node.op, ast.And) else "or_"
        result = node.values[-1]
        for value in reversed(node.values[:-1]):
            result = ctx_call(method, value, lambda_of(result))
        return ast.copy_location(result, node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.copy_location(ctx_call("not_", node.operand), node)
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        return power_call(node, self.body.namespace)

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        """``x is True``: numba compares a boolean's value (per lane for lane values)."""
        literal = bool_literal(node)
        self.generic_visit(node)
        result = is_bool_call(node, literal, self.body.namespace, "__pk_is_bool", _lanes_is_bool)
        if isinstance(result, ast.UnaryOp):  # `is not`: per lane
            result = ast.copy_location(ctx_call("not_", result.operand), node)
        return result

    def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
        self.generic_visit(node)
        call = ctx_call("ifexp", node.test, lambda_of(node.body), lambda_of(node.orelse))
        return ast.copy_location(call, node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        body = self.body
        rewriter = body.owner._rewriter
        value = rewriter.resolve(node.func, body.scope)
        target = None
        if rewriter.allocator(value) is not None:
            node.keywords = without_alignment(node)
        self.generic_visit(node)
        name = rewriter.intrinsic_name(value)
        if name in WAITING_INTRINSICS:
            if node.keywords:
                raise Unsupported(f"line {node.lineno}: cuda.{name} with keyword arguments")
            if name.startswith("match_"):  # a mask per distinct value: the per-thread engine
                raise Unsupported(f"line {node.lineno}: cuda.{name} is not vectorised")
            return ast.copy_location(ctx_call("wait", ast.Constant(name), *node.args), node)
        helper = rewriter.allocator(value)
        if helper is not None:
            kind = {v: k[0] for k, v in ALLOCATORS.items()}[helper]
            site = rewriter.next_site()
            call = ctx_call(kind, ast.Constant(site), ast.Constant(target or "array"), *node.args)
            call.keywords = node.keywords
            return ast.copy_location(call, node)
        if is_device_function(value):
            function = _without_recursion(body.owner, value)
            alias = body.owner.fresh(f"device_{function.name}_")
            body.namespace[alias] = function.function
            return ast.copy_location(
                ast.Call(func=name_node(alias), args=node.args, keywords=node.keywords), node
            )
        return node
