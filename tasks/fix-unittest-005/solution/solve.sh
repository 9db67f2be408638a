#!/bin/bash
sed -i 's/lower/upper/' /app/mint_lib.py
