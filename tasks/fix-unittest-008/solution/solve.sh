#!/bin/bash
sed -i 's/lower/upper/' /app/lantern_tools.py
