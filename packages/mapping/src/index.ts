// placeholder until the package lands
export {};
