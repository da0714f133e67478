//! Reading the trait: which methods, their wire names, params, results
//! and docs; every unsupported shape refused at the item that has it.

use proc_macro2::TokenStream;
use syn::spanned::Spanned;
use syn::{
    Attribute, Error, FnArg, GenericArgument, Ident, ItemTrait, LitStr, Pat, PathArguments, ReturnType,
    TraitItem, TraitItemFn, Type, Visibility,
};

/// The trait and what the macro learned of it.
pub struct Service {
    /// The trait as written, minus the macro's own `#[rpc(...)]` attributes.
    pub item: ItemTrait,
    pub methods: Vec<Method>,
}

/// One method or notification.
pub struct Method {
    pub ident: Ident,
    /// Its name on the wire (namespace included).
    pub wire_name: String,
    pub is_async: bool,
    pub notification: bool,
    /// The params, in order (the request context excluded).
    pub args: Vec<(Ident, Type)>,
    /// Whether the last argument is the request context.
    pub context: bool,
    /// `T` of `Result<T, jrpc::Error>`; `None` for a notification.
    pub ok: Option<Type>,
    /// Its doc comment, line by line.
    pub docs: Vec<String>,
}

pub fn parse(attr: TokenStream, item: TokenStream) -> syn::Result<Service> {
    let mut namespace: Option<String> = None;
    let mut separator = ".".to_owned();
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("namespace") {
            namespace = Some(meta.value()?.parse::<LitStr>()?.value());
            Ok(())
        } else if meta.path.is_ident("separator") {
            separator = meta.value()?.parse::<LitStr>()?.value();
            Ok(())
        } else {
            Err(meta.error("unknown #[rpc] setting: expected `namespace = \"...\"` or `separator = \"...\"`"))
        }
    });
    syn::parse::Parser::parse2(parser, attr)?;
    let mut item: ItemTrait = syn::parse2(item)?;
    if !item.generics.params.is_empty() || item.generics.where_clause.is_some() {
        return Err(Error::new(
            item.generics.span(),
            "#[rpc] traits cannot be generic",
        ));
    }
    match &item.vis {
        Visibility::Public(_) | Visibility::Inherited => {}
        Visibility::Restricted(r) if r.path.is_ident("crate") => {}
        other => {
            return Err(Error::new(
                other.span(),
                "use `pub`, `pub(crate)` or no visibility on an #[rpc] trait",
            ))
        }
    }
    let mut methods = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for trait_item in &mut item.items {
        let TraitItem::Fn(function) = trait_item else {
            return Err(Error::new(
                trait_item.span(),
                "an #[rpc] trait holds only methods",
            ));
        };
        let method = method(function, namespace.as_deref(), &separator)?;
        if names.contains(&method.wire_name) {
            return Err(Error::new(
                function.sig.ident.span(),
                format!("two methods are named {:?} on the wire", method.wire_name),
            ));
        }
        if method.wire_name.starts_with("rpc.") {
            return Err(Error::new(
                function.sig.ident.span(),
                "names beginning with \"rpc.\" are reserved for system extensions",
            ));
        }
        names.push(method.wire_name.clone());
        methods.push(method);
    }
    Ok(Service { item, methods })
}

/// Reads one method, removing its `#[rpc(...)]` attribute.
fn method(function: &mut TraitItemFn, namespace: Option<&str>, separator: &str) -> syn::Result<Method> {
    let (rename, notification) = method_settings(&mut function.attrs)?;
    let sig = &function.sig;
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        return Err(Error::new(
            sig.generics.span(),
            "#[rpc] methods cannot be generic",
        ));
    }
    if let Some(unsafety) = &sig.unsafety {
        return Err(Error::new(unsafety.span(), "#[rpc] methods cannot be unsafe"));
    }
    if let Some(variadic) = &sig.variadic {
        return Err(Error::new(variadic.span(), "#[rpc] methods cannot be variadic"));
    }
    let mut inputs = sig.inputs.iter();
    match inputs.next() {
        Some(FnArg::Receiver(receiver)) if receiver.reference.is_some() && receiver.mutability.is_none() => {}
        Some(other @ FnArg::Receiver(_)) => {
            return Err(Error::new(
                other.span(),
                "an #[rpc] method takes `&self` (calls run concurrently)",
            ))
        }
        _ => {
            return Err(Error::new(
                sig.ident.span(),
                "an #[rpc] method takes `&self` first",
            ))
        }
    }
    let is_async = sig.asyncness.is_some();
    let inputs: Vec<&FnArg> = inputs.collect();
    let mut args = Vec::new();
    let mut context = false;
    for (index, input) in inputs.iter().enumerate() {
        let FnArg::Typed(typed) = input else {
            unreachable!("only the first argument can be a receiver")
        };
        if is_context(&typed.ty) {
            if index + 1 != inputs.len() {
                return Err(Error::new(
                    typed.span(),
                    "the request context must be the last argument",
                ));
            }
            let by_reference = matches!(&*typed.ty, Type::Reference(_));
            if is_async == by_reference {
                let wanted = if is_async {
                    "an async method takes the context by value: `cx: RequestContext`"
                } else {
                    "a plain method takes the context by reference: `cx: &RequestContext`"
                };
                return Err(Error::new(typed.ty.span(), wanted));
            }
            context = true;
            continue;
        }
        let Pat::Ident(pat) = &*typed.pat else {
            return Err(Error::new(
                typed.pat.span(),
                "name each argument (`name: Type`): names are the params' names",
            ));
        };
        if pat.by_ref.is_some() || pat.subpat.is_some() {
            return Err(Error::new(
                typed.pat.span(),
                "name each argument plainly (`name: Type`)",
            ));
        }
        if let Type::Reference(reference) = &*typed.ty {
            return Err(Error::new(
                reference.span(),
                "arguments are decoded from the params: take owned types (`String`, not `&str`)",
            ));
        }
        if has_impl_trait(&typed.ty) {
            return Err(Error::new(
                typed.ty.span(),
                "arguments need concrete types (no `impl Trait`)",
            ));
        }
        let mut ident = pat.ident.clone();
        // `_name` is a param called `name`.
        let unprefixed = ident.to_string().trim_start_matches('_').to_owned();
        if unprefixed.is_empty() {
            return Err(Error::new(
                pat.span(),
                "name each argument: `_` has no name to send",
            ));
        }
        if ident != unprefixed {
            ident = Ident::new(&unprefixed, ident.span());
        }
        args.push((ident, (*typed.ty).clone()));
    }
    let ok = if notification {
        if let ReturnType::Type(_, ty) = &sig.output {
            return Err(Error::new(
                ty.span(),
                "a notification returns nothing: no reply is sent",
            ));
        }
        None
    } else {
        Some(result_ok(&sig.output, sig.ident.span())?)
    };
    let rust_name = sig.ident.to_string();
    let base = rename.unwrap_or_else(|| rust_name.trim_start_matches("r#").to_owned());
    let wire_name = match namespace {
        Some(namespace) => format!("{namespace}{separator}{base}"),
        None => base,
    };
    Ok(Method {
        ident: sig.ident.clone(),
        wire_name,
        is_async,
        notification,
        args,
        context,
        ok,
        docs: docs(&function.attrs),
    })
}

/// Reads and removes `#[rpc(name = "...")]` and `#[rpc(notification)]`.
fn method_settings(attrs: &mut Vec<Attribute>) -> syn::Result<(Option<String>, bool)> {
    let mut rename = None;
    let mut notification = false;
    let mut kept = Vec::new();
    for attr in attrs.drain(..) {
        if !attr.path().is_ident("rpc") {
            kept.push(attr);
            continue;
        }
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("name") {
                rename = Some(meta.value()?.parse::<LitStr>()?.value());
                Ok(())
            } else if meta.path.is_ident("notification") {
                notification = true;
                Ok(())
            } else {
                Err(meta
                    .error("unknown #[rpc] setting on a method: expected `name = \"...\"` or `notification`"))
            }
        })?;
    }
    *attrs = kept;
    Ok((rename, notification))
}

/// `T` of a `Result<T, jrpc::Error>` return type.
fn result_ok(output: &ReturnType, at: proc_macro2::Span) -> syn::Result<Type> {
    const WANTED: &str = "an #[rpc] method returns `Result<T, jrpc::Error>` (or is a `#[rpc(notification)]`)";
    let ReturnType::Type(_, ty) = output else {
        return Err(Error::new(at, WANTED));
    };
    let Type::Path(path) = &**ty else {
        return Err(Error::new(ty.span(), WANTED));
    };
    let Some(last) = path.path.segments.last().filter(|s| s.ident == "Result") else {
        return Err(Error::new(ty.span(), WANTED));
    };
    let PathArguments::AngleBracketed(generics) = &last.arguments else {
        return Err(Error::new(ty.span(), WANTED));
    };
    let types: Vec<&Type> = generics
        .args
        .iter()
        .filter_map(|a| match a {
            GenericArgument::Type(t) => Some(t),
            _ => None,
        })
        .collect();
    match types.as_slice() {
        [ok, error] if is_error(error) => {
            if has_impl_trait(ok) {
                return Err(Error::new(
                    ok.span(),
                    "the result needs a concrete type (no `impl Trait`)",
                ));
            }
            Ok((*ok).clone())
        }
        [_, error] => Err(Error::new(
            error.span(),
            "the error type of an #[rpc] method is `jrpc::Error`",
        )),
        _ => Err(Error::new(ty.span(), WANTED)),
    }
}

fn last_ident(ty: &Type) -> Option<&Ident> {
    match ty {
        Type::Path(path) => path.path.segments.last().map(|s| &s.ident),
        Type::Reference(reference) => last_ident(&reference.elem),
        _ => None,
    }
}

fn is_context(ty: &Type) -> bool {
    last_ident(ty).is_some_and(|i| i == "RequestContext")
}

fn is_error(ty: &Type) -> bool {
    last_ident(ty).is_some_and(|i| i == "Error")
}

fn has_impl_trait(ty: &Type) -> bool {
    matches!(ty, Type::ImplTrait(_)) || quote::quote!(#ty).to_string().contains("impl ")
}

/// The lines of a doc comment.
fn docs(attrs: &[Attribute]) -> Vec<String> {
    attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            syn::Meta::NameValue(nv) => match &nv.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(text),
                    ..
                }) => Some(text.value()),
                _ => None,
            },
            _ => None,
        })
        .map(|line| line.strip_prefix(' ').unwrap_or(&line).to_owned())
        .collect()
}

/// The trait's doc comment, for the module and client docs.
pub fn trait_docs(item: &ItemTrait) -> Vec<String> {
    docs(&item.attrs)
}
