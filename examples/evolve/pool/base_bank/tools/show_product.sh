cat product.smi
