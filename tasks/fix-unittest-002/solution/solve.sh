#!/bin/bash
sed -i 's/lower/upper/' /app/saffron_lib.py
