"""Small builders of the AST nodes the lockstep rewrite emits."""

from __future__ import annotations

import ast


def name_node(identifier: str, store: bool = False) -> ast.Name:
    return ast.Name(id=identifier, ctx=ast.Store() if store else ast.Load())


def ctx_call(method: str, *args: ast.expr) -> ast.Call:
    return ast.Call(
        func=ast.Attribute(value=name_node("__pk_ctx"), attr=method, ctx=ast.Load()),
        args=list(args),
        keywords=[],
    )


def assign_to(target: str, value: ast.expr) -> ast.Assign:
    return ast.Assign(targets=[name_node(target, store=True)], value=value)


def lambda_of(body: ast.expr) -> ast.Lambda:
    arguments = ast.arguments(
        posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]
    )
    return ast.Lambda(args=arguments, body=body)


def has_node(node: ast.AST, kinds: tuple[type, ...], into_loops: bool = True) -> bool:
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, kinds):
            return True
        for child in ast.iter_child_nodes(current):
            if into_loops or not isinstance(child, (ast.While, ast.For)):
                stack.append(child)
    return False
